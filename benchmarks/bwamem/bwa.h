/* A BWA-MEM-like short-read aligner kernel: the storage-intensive
 * workload of the Mmalloc paper, written from the published algorithm
 * (seed, chain, extend) for libhpcmem's benchmarks.
 *
 * Like BWA-MEM it allocates per read and per step: seed vectors, chains
 * that grow by realloc, query profiles and DP rows for every extension,
 * traceback matrices and CIGARs, and SAM text made by the worker threads
 * and freed by the main thread after output.  That traffic is the point:
 * the allocator under test serves it from 1 to 16 OpenMP threads. */
#ifndef BWA_H
#define BWA_H

#include <stdint.h>
#include <stdio.h>
#include <stddef.h>

/* ------------------------------------------------------------------ */
/* sequences (seqio.c)                                                  */

/* A C G T -> 0..3, anything else (N) -> 4 */
extern const uint8_t bwa_nt4[256];
#define BWA_N 4

typedef struct bwa_contig {
  char *name;
  int64_t offset;  /* in the concatenated reference */
  int64_t len;
} bwa_contig_t;

typedef struct bwa_ref {
  uint8_t *seq;    /* 0..3; N replaced by a base derived from its position */
  int64_t len;
  bwa_contig_t *contigs;
  int ncontigs;
} bwa_ref_t;

/** Read a FASTA reference.  @return 0, -errno on I/O, -EINVAL on bad input (message on stderr). */
int bwa_ref_load(const char *path, bwa_ref_t *ref);
void bwa_ref_free(bwa_ref_t *ref);
/** Contig holding global position pos (binary search). */
int bwa_ref_contig(const bwa_ref_t *ref, int64_t pos);

typedef struct bwa_read {
  char *name, *seq, *qual;  /* each malloc'd by the reader, as kseq does */
  int len;
  char *sam;                /* made by a worker, written and freed by the main thread */
  /* outcome, for the validation */
  int mapped, mapq, strand, contig;
  int64_t pos_unclipped;    /* 0-based, on the contig */
} bwa_read_t;

typedef struct bwa_reader bwa_reader_t;
/** FASTQ or FASTA reads ("-" = stdin). NULL with a message when it cannot be opened. */
bwa_reader_t *bwa_reader_open(const char *path);
/** Up to max reads into *out (malloc'd array). @return count, 0 at the end, -EINVAL on bad input. */
int bwa_reader_batch(bwa_reader_t *r, int max, bwa_read_t **out);
void bwa_reader_close(bwa_reader_t *r);
void bwa_reads_free(bwa_read_t *reads, int n);

/* ------------------------------------------------------------------ */
/* k-mer index (index.c)                                                */

#define BWA_K 19          /* minimum seed length, as BWA-MEM's -k */
#define BWA_BUCKET_BITS 22 /* first 11 bases select the bucket */

typedef struct bwa_index {
  const bwa_ref_t *ref;
  uint32_t *bucket;  /* 2^22 + 1 starts */
  uint64_t *entry;   /* (low 16 bits of the k-mer code) << 32 | position */
  int64_t nentries;
} bwa_index_t;

int bwa_index_build(const bwa_ref_t *ref, bwa_index_t *idx);
void bwa_index_free(bwa_index_t *idx);
/** Positions of the k-mer with this code: *first and the count. */
int64_t bwa_index_lookup(const bwa_index_t *idx, uint64_t code, const uint64_t **first);

/* ------------------------------------------------------------------ */
/* Smith-Waterman (ksw.c)                                               */

typedef struct bwa_score {
  int a, b;          /* match score, mismatch penalty */
  int o, e;          /* gap open, gap extension */
  int w;             /* band width */
  int zdrop;
  int pen_clip;      /* clipping penalty: prefer end-to-end when within it */
  int min_score;     /* minimum score to report an alignment */
  int max_occ;       /* skip k-mers that occur more often */
  int max_chains;    /* chains extended per read */
  int8_t mat[25];    /* 5x5 with N */
} bwa_score_t;

void bwa_score_init(bwa_score_t *s);

typedef struct bwa_ext {
  int score;        /* best score, seed included */
  int qle, tle;     /* query and target lengths at the best score */
  int gscore, gtle; /* best score that reaches the end of the query, and its target length */
} bwa_ext_t;

/** Extend from a seed of score h0 along q and t (both in extension order). */
void bwa_extend(int qlen, const uint8_t *q, int tlen, const uint8_t *t, const bwa_score_t *s,
                int h0, bwa_ext_t *out);

/**
 * Banded global alignment of q against t with traceback.
 * @return score; *cigar (malloc'd, BAM-style len<<4|op with op 0=M 1=I 2=D) and *ncigar.
 */
int bwa_global(int qlen, const uint8_t *q, int tlen, const uint8_t *t, const bwa_score_t *s,
               int w, uint32_t **cigar, int *ncigar);

/* ------------------------------------------------------------------ */
/* per-read pipeline (align.c)                                          */

/** Align one read, fill its outcome and its SAM line (r->sam). @return 0 or -ENOMEM. */
int bwa_align_read(const bwa_index_t *idx, const bwa_score_t *s, bwa_read_t *r);

#endif
