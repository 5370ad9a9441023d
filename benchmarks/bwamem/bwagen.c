/* bwagen: a synthetic reference and reads drawn from it, for the bwamem
 * kernel.  Every read name carries where the read came from
 * (r<id>_<contig>_<1-based position>_<strand>), so the aligner can check
 * its own answers.  The reference has repeated segments (diverged copies)
 * and runs of N, so seeds hit more than one place and mapping qualities
 * matter, as on a real genome. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

typedef struct preset {
  const char *name;
  size_t ref_len;
  int reads;
} preset_t;

/* One reference, three read sets, as the Mmalloc paper's BWA0/1/2. */
static const preset_t presets[] = {
  {"tiny", 200000, 2000},
  {"bwa0", 4000000, 20000},
  {"bwa1", 4000000, 80000},
  {"bwa2", 4000000, 320000},
};

static uint64_t rng_state;
static uint64_t rng(void)  /* splitmix64 */
{
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double urand(void) { return (double)(rng() >> 11) * (1.0 / 9007199254740992.0); }
static uint64_t below(uint64_t n) { return n ? rng() % n : 0; }

static const char bases[4] = {'A', 'C', 'G', 'T'};
static char other_base(char c)
{
  char b;
  do
    b = bases[below(4)];
  while (b == c);
  return b;
}
static char comp(char c)
{
  switch (c) {
  case 'A': return 'T';
  case 'C': return 'G';
  case 'G': return 'C';
  case 'T': return 'A';
  default: return 'N';
  }
}

static void usage(FILE *out)
{
  fprintf(out,
    "usage: bwagen [options] PREFIX      writes PREFIX.fa and PREFIX.fq\n"
    "  --preset=NAME     tiny, bwa0, bwa1, bwa2 (reference length and read count)\n"
    "  --ref-len=N       reference length in bases (suffix k, M)  [bwa0: 4M]\n"
    "  --contigs=N       contigs (default 4)\n"
    "  --reads=N         reads [bwa0: 20000]\n"
    "  --scale=F         multiply the read count (e.g. 0.1 for a quick run)\n"
    "  --read-len=N      read length (default 100)\n"
    "  --error=F         substitution rate per base (default 0.01)\n"
    "  --indel=F         indel rate per base (default 0.0005)\n"
    "  --repeats=F       fraction of the reference in diverged repeat copies (default 0.02)\n"
    "  --seed=N          random seed (default 11)\n");
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
  char *end;
  double v = strtod(s, &end);
  if (*s == '\0' || *end != '\0' || !(v >= lo && v <= hi))
    return -EINVAL;
  *out = v;
  return 0;
}

int main(int argc, char **argv)
{
  static const struct option longopts[] = {
    {"preset", required_argument, NULL, 'p'}, {"ref-len", required_argument, NULL, 'g'},
    {"contigs", required_argument, NULL, 'c'}, {"reads", required_argument, NULL, 'n'},
    {"scale", required_argument, NULL, 'S'}, {"read-len", required_argument, NULL, 'l'},
    {"error", required_argument, NULL, 'e'}, {"indel", required_argument, NULL, 'i'},
    {"repeats", required_argument, NULL, 'r'}, {"seed", required_argument, NULL, 's'},
    {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
  };
  size_t ref_len = presets[1].ref_len;
  int ncontigs = 4, nreads = presets[1].reads, read_len = 100, seed = 11, opt, li = 0;
  double err = 0.01, indel = 0.0005, repeats = 0.02, scale = 1.0;

  while ((opt = getopt_long(argc, argv, "", longopts, &li)) != -1) {
    int bad = 0;
    switch (opt) {
    case 'p': {
      size_t k;
      for (k = 0; k < sizeof presets / sizeof presets[0]; k++)
        if (strcmp(optarg, presets[k].name) == 0)
          break;
      if (k == sizeof presets / sizeof presets[0]) {
        fprintf(stderr, "bwagen: unknown preset '%s' (tiny, bwa0, bwa1, bwa2)\n", optarg);
        return 2;
      }
      ref_len = presets[k].ref_len;
      nreads = presets[k].reads;
      break;
    }
    case 'g': bad = bench_parse_size(optarg, &ref_len) != 0 || ref_len < 1000 || ref_len >= ((size_t)1 << 32); break;
    case 'c': bad = bench_parse_pos_int(optarg, &ncontigs) != 0 || ncontigs > 1000; break;
    case 'n': bad = bench_parse_pos_int(optarg, &nreads) != 0; break;
    case 'S': bad = parse_double(optarg, 1e-6, 1e6, &scale) != 0; break;
    case 'l': bad = bench_parse_pos_int(optarg, &read_len) != 0 || read_len < 30 || read_len > 10000; break;
    case 'e': bad = parse_double(optarg, 0.0, 0.5, &err) != 0; break;
    case 'i': bad = parse_double(optarg, 0.0, 0.1, &indel) != 0; break;
    case 'r': bad = parse_double(optarg, 0.0, 0.5, &repeats) != 0; break;
    case 's': bad = bench_parse_pos_int(optarg, &seed) != 0; break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
    if (bad) {
      fprintf(stderr, "bwagen: bad value '%s' for --%s\n", optarg, longopts[li].name);
      return 2;
    }
  }
  if (optind + 1 != argc) {
    usage(stderr);
    return 2;
  }
  nreads = (int)((double)nreads * scale + 0.5);
  if (nreads < 1)
    nreads = 1;
  const char *prefix = argv[optind];
  size_t clen = ref_len / (size_t)ncontigs;
  if (clen < (size_t)read_len * 4) {
    fprintf(stderr, "bwagen: contigs of %zu bases are too short for %d-base reads\n", clen, read_len);
    return 2;
  }
  rng_state = (uint64_t)seed * 0x2545F4914F6CDD1Dull;

  /* the reference: random contigs, then diverged copies of some segments */
  size_t total = clen * (size_t)ncontigs;
  char *ref = malloc(total);
  if (ref == NULL) {
    fprintf(stderr, "bwagen: out of memory\n");
    return 1;
  }
  for (size_t k = 0; k < total; k++)
    ref[k] = bases[below(4)];
  for (size_t copied = 0; copied < (size_t)(repeats * (double)total);) {
    size_t seg = 300 + below(1200);
    int cs = (int)below((uint64_t)ncontigs), cd = (int)below((uint64_t)ncontigs);
    if (seg >= clen / 2)
      break;
    size_t from = cs * clen + below(clen - seg), to = cd * clen + below(clen - seg);
    if (from < to + seg && to < from + seg)
      continue;  /* overlapping copy */
    for (size_t k = 0; k < seg; k++)
      ref[to + k] = urand() < 0.01 ? other_base(ref[from + k]) : ref[from + k];
    copied += seg;
  }
  for (int c = 0; c < ncontigs; c++) {  /* one run of N per contig */
    size_t at = c * clen + below(clen - 50);
    memset(ref + at, 'N', 50);
  }

  char path[4096];
  snprintf(path, sizeof path, "%s.fa", prefix);
  FILE *fa = fopen(path, "w");
  if (fa == NULL) {
    fprintf(stderr, "bwagen: cannot write %s: %s\n", path, strerror(errno));
    return 1;
  }
  for (int c = 0; c < ncontigs; c++) {
    fprintf(fa, ">chr%d synthetic contig %d of %d\n", c + 1, c + 1, ncontigs);
    for (size_t k = 0; k < clen; k += 60)
      fprintf(fa, "%.*s\n", (int)(clen - k < 60 ? clen - k : 60), ref + c * clen + k);
  }
  if (fclose(fa) != 0) {
    fprintf(stderr, "bwagen: error writing %s\n", path);
    return 1;
  }

  snprintf(path, sizeof path, "%s.fq", prefix);
  FILE *fq = fopen(path, "w");
  if (fq == NULL) {
    fprintf(stderr, "bwagen: cannot write %s: %s\n", path, strerror(errno));
    return 1;
  }
  char *seq = malloc((size_t)read_len + 1), *qual = malloc((size_t)read_len + 1);
  char *tmp = malloc((size_t)read_len + 1);
  for (int r = 0; r < nreads; r++) {
    int c, n = 0;
    size_t pos, p;
    do {  /* walk the reference from pos, with substitutions and indels */
      c = (int)below((uint64_t)ncontigs);
      pos = c * clen + below(clen - (size_t)read_len - 20);
      p = pos;
      n = 0;
      while (n < read_len && p < (c + 1) * clen) {
        double u = urand();
        if (u < indel / 2 && n > 0) {            /* insertion in the read */
          seq[n] = bases[below(4)];
          qual[n++] = '5';
        } else if (u < indel && n > 0) {         /* deletion from the read */
          p++;
        } else {
          char b = ref[p++];
          int sub = urand() < err;
          seq[n] = sub ? other_base(b) : b;
          qual[n++] = sub ? '5' : (char)('5' + 5 + below(10));
        }
      }
    } while (n < read_len);
    int reverse = (int)below(2);
    if (reverse) {
      for (int k = 0; k < read_len; k++)
        tmp[k] = comp(seq[read_len - 1 - k]);
      memcpy(seq, tmp, (size_t)read_len);
      for (int k = 0; k < read_len; k++)
        tmp[k] = qual[read_len - 1 - k];
      memcpy(qual, tmp, (size_t)read_len);
    }
    seq[read_len] = qual[read_len] = '\0';
    fprintf(fq, "@r%d_chr%d_%zu_%c\n%s\n+\n%s\n", r + 1, c + 1, pos - c * clen + 1, reverse ? '-' : '+',
            seq, qual);
  }
  if (fclose(fq) != 0) {
    fprintf(stderr, "bwagen: error writing %s\n", path);
    return 1;
  }
  printf("bwagen: %s.fa (%d contigs, %zu bases), %s.fq (%d reads of %d bases, error %.3g, indel %.3g, seed %d)\n",
         prefix, ncontigs, total, prefix, nreads, read_len, err, indel, seed);
  free(ref);
  free(seq);
  free(qual);
  free(tmp);
  return 0;
}
