/* FASTA references, FASTQ/FASTA reads. */
#include "config.h"
#include "bwa.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

const uint8_t bwa_nt4[256] = {
#define X4 4, 4, 4, 4
#define X16 X4, X4, X4, X4
  X16, X16, X16, X16,
  /* 64 '@' */ 4, 0, 4, 1, 4, 4, 4, 2, 4, 4, 4, 4, 4, 4, 4, 4,
  /* 80 'P' */ 4, 4, 4, 4, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
  /* 96 '`' */ 4, 0, 4, 1, 4, 4, 4, 2, 4, 4, 4, 4, 4, 4, 4, 4,
  /* 112 'p' */ 4, 4, 4, 4, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
  X16, X16, X16, X16, X16, X16, X16, X16,
#undef X16
#undef X4
};

static char *dup_name(const char *line)
{
  size_t n = strcspn(line, " \t\r\n");
  char *s = malloc(n + 1);
  if (s != NULL) {
    memcpy(s, line, n);
    s[n] = '\0';
  }
  return s;
}

static void chomp(char *line, ssize_t *len)
{
  while (*len > 0 && (line[*len - 1] == '\n' || line[*len - 1] == '\r'))
    line[--*len] = '\0';
}

int bwa_ref_load(const char *path, bwa_ref_t *ref)
{
  FILE *f = fopen(path, "r");
  char *line = NULL;
  size_t cap_line = 0;
  ssize_t len;
  int64_t cap = 1 << 20;
  int cap_contigs = 16, rc = 0;

  memset(ref, 0, sizeof *ref);
  if (f == NULL) {
    rc = -errno;
    fprintf(stderr, "bwamem: cannot open reference %s: %s\n", path, strerror(errno));
    return rc;
  }
  ref->seq = malloc(cap);
  ref->contigs = malloc(cap_contigs * sizeof *ref->contigs);
  if (ref->seq == NULL || ref->contigs == NULL) {
    rc = -ENOMEM;
    goto out;
  }
  while ((len = getline(&line, &cap_line, f)) >= 0) {
    chomp(line, &len);
    if (line[0] == '>') {
      if (ref->ncontigs == cap_contigs) {
        bwa_contig_t *c = realloc(ref->contigs, 2 * cap_contigs * sizeof *c);
        if (c == NULL) { rc = -ENOMEM; goto out; }
        ref->contigs = c;
        cap_contigs *= 2;
      }
      bwa_contig_t *c = &ref->contigs[ref->ncontigs++];
      c->name = dup_name(line + 1);
      c->offset = ref->len;
      c->len = 0;
      if (c->name == NULL) { rc = -ENOMEM; goto out; }
      if (c->name[0] == '\0') {
        fprintf(stderr, "bwamem: %s: contig without a name\n", path);
        rc = -EINVAL;
        goto out;
      }
      continue;
    }
    if (len == 0)
      continue;
    if (ref->ncontigs == 0) {
      fprintf(stderr, "bwamem: %s is not FASTA (sequence before the first '>')\n", path);
      rc = -EINVAL;
      goto out;
    }
    if (ref->len + len > cap) {
      while (ref->len + len > cap)
        cap *= 2;
      uint8_t *s = realloc(ref->seq, cap);
      if (s == NULL) { rc = -ENOMEM; goto out; }
      ref->seq = s;
    }
    for (ssize_t i = 0; i < len; i++) {
      uint8_t c = bwa_nt4[(uint8_t)line[i]];
      if (c == BWA_N) {
        if (!isalpha((unsigned char)line[i]) && line[i] != '*' && line[i] != '-') {
          fprintf(stderr, "bwamem: %s: unexpected character '%c' in a sequence\n", path, line[i]);
          rc = -EINVAL;
          goto out;
        }
        /* BWA turns ambiguous bases into random ones; a hash of the
         * position keeps that deterministic */
        uint64_t h = (uint64_t)(ref->len + i) * 0x9E3779B97F4A7C15ull;
        c = (uint8_t)(h >> 62);
      }
      ref->seq[ref->len + i] = c;
    }
    ref->len += len;
    ref->contigs[ref->ncontigs - 1].len += len;
  }
  if (ferror(f)) {
    rc = -EIO;
    fprintf(stderr, "bwamem: error reading %s\n", path);
  } else if (ref->len == 0) {
    rc = -EINVAL;
    fprintf(stderr, "bwamem: %s holds no sequence\n", path);
  }
out:
  free(line);
  fclose(f);
  if (rc != 0)
    bwa_ref_free(ref);
  return rc;
}

void bwa_ref_free(bwa_ref_t *ref)
{
  for (int i = 0; i < ref->ncontigs; i++)
    free(ref->contigs[i].name);
  free(ref->contigs);
  free(ref->seq);
  memset(ref, 0, sizeof *ref);
}

int bwa_ref_contig(const bwa_ref_t *ref, int64_t pos)
{
  int lo = 0, hi = ref->ncontigs - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (ref->contigs[mid].offset <= pos)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* ------------------------------------------------------------------ */

struct bwa_reader {
  FILE *f;
  int own;
  char *line;
  size_t cap;
  char *pending;  /* FASTA: the header line read ahead */
  int format;     /* 0 unknown, '@' FASTQ, '>' FASTA */
  int have_line;  /* FASTQ: the first name line is already in line */
  long lineno;
  const char *path;
};

bwa_reader_t *bwa_reader_open(const char *path)
{
  bwa_reader_t *r = calloc(1, sizeof *r);
  if (r == NULL)
    return NULL;
  r->path = path;
  if (strcmp(path, "-") == 0) {
    r->f = stdin;
  } else if ((r->f = fopen(path, "r")) == NULL) {
    fprintf(stderr, "bwamem: cannot open reads %s: %s\n", path, strerror(errno));
    free(r);
    return NULL;
  } else {
    r->own = 1;
  }
  return r;
}

void bwa_reader_close(bwa_reader_t *r)
{
  if (r == NULL)
    return;
  if (r->own)
    fclose(r->f);
  free(r->line);
  free(r->pending);
  free(r);
}

static ssize_t next_line(bwa_reader_t *r)
{
  ssize_t len = getline(&r->line, &r->cap, r->f);
  if (len >= 0) {
    chomp(r->line, &len);
    r->lineno++;
  }
  return len;
}

static int bad_input(bwa_reader_t *r, const char *what)
{
  fprintf(stderr, "bwamem: %s:%ld: %s\n", r->path, r->lineno, what);
  return -EINVAL;
}

/* one FASTQ record; 1 = read, 0 = end, <0 error */
static int read_fastq(bwa_reader_t *r, bwa_read_t *rd)
{
  ssize_t len;
  if (r->have_line) {
    r->have_line = 0;
  } else {
    do {
      if ((len = next_line(r)) < 0)
        return 0;
    } while (len == 0);
  }
  if (r->line[0] != '@')
    return bad_input(r, "FASTQ record does not start with '@'");
  if ((rd->name = dup_name(r->line + 1)) == NULL)
    return -ENOMEM;
  if ((len = next_line(r)) < 0)
    return bad_input(r, "FASTQ record ends after its name");
  rd->len = (int)len;
  if ((rd->seq = strdup(r->line)) == NULL)
    return -ENOMEM;
  if ((len = next_line(r)) < 0 || r->line[0] != '+')
    return bad_input(r, "FASTQ record without its '+' line");
  if ((len = next_line(r)) < 0 || len != rd->len)
    return bad_input(r, "FASTQ quality line does not match the sequence length");
  if ((rd->qual = strdup(r->line)) == NULL)
    return -ENOMEM;
  return 1;
}

static int read_fasta(bwa_reader_t *r, bwa_read_t *rd)
{
  ssize_t len;
  size_t n = 0, cap = 256;

  if (r->pending == NULL)
    return 0;
  rd->name = dup_name(r->pending + 1);
  free(r->pending);
  r->pending = NULL;
  if (rd->name == NULL || (rd->seq = malloc(cap)) == NULL)
    return -ENOMEM;
  while ((len = next_line(r)) >= 0) {
    if (r->line[0] == '>') {
      if ((r->pending = strdup(r->line)) == NULL)
        return -ENOMEM;
      break;
    }
    if (n + len + 1 > cap) {
      while (n + len + 1 > cap)
        cap *= 2;
      char *s = realloc(rd->seq, cap);
      if (s == NULL)
        return -ENOMEM;
      rd->seq = s;
    }
    memcpy(rd->seq + n, r->line, len);
    n += len;
  }
  rd->seq[n] = '\0';
  rd->len = (int)n;
  return 1;
}

int bwa_reader_batch(bwa_reader_t *r, int max, bwa_read_t **out)
{
  bwa_read_t *reads;
  int n = 0, rc = 0;

  *out = NULL;
  if (r->format == 0) {
    ssize_t len;
    do {
      if ((len = next_line(r)) < 0)
        return 0;
    } while (len == 0);
    if (r->line[0] == '>') {
      r->format = '>';
      if ((r->pending = strdup(r->line)) == NULL)
        return -ENOMEM;
    } else if (r->line[0] == '@') {
      r->format = '@';
      r->have_line = 1;
    } else {
      return bad_input(r, "neither FASTQ ('@') nor FASTA ('>')");
    }
  }
  if ((reads = calloc((size_t)max, sizeof *reads)) == NULL)
    return -ENOMEM;
  while (n < max) {
    rc = r->format == '@' ? read_fastq(r, &reads[n]) : read_fasta(r, &reads[n]);
    if (rc <= 0)
      break;
    n++;
  }
  if (rc < 0) {
    bwa_reads_free(reads, n + 1);
    return rc;
  }
  if (n == 0) {
    free(reads);
    return 0;
  }
  *out = reads;
  return n;
}

void bwa_reads_free(bwa_read_t *reads, int n)
{
  if (reads == NULL)
    return;
  for (int i = 0; i < n; i++) {
    free(reads[i].name);
    free(reads[i].seq);
    free(reads[i].qual);
    free(reads[i].sam);
  }
  free(reads);
}
