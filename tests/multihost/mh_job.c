/* MPI program for the simulated-host tests (tests/multihost/test_multihost.sh).
 *   mh_job MIB[,MIB...]   rank r holds the r-th amount (the last one repeats)
 * Rank 0 prints, for the script to check:
 *   host R NAME          the host (uname) each rank runs on
 *   nodes N              how many node groups MPI_COMM_TYPE_SHARED made
 *   result CASE ok | result CASE fail REASON
 * Cases:
 *   split_type_shared  the node communicator of every rank holds exactly
 *                      the ranks whose uname() is its own
 *   shared_segment.info                  the shared segment spans the host's ranks
 *   shared_segment.one_mapping_per_host  its backing file is one per host
 *   shared_segment.same_host_visible     an object written by a rank of the host is
 *                                        read through its offset by the others
 *   shared_segment.other_host_not_shared the same offset on another host does
 *                                        not hold that object
 * Then every rank allocates its amount (one large block, touched, and 64
 * small ones), all hold it together for 100 ms and free it: the report at
 * MPI_Finalize and the traces have known per-rank and per-node memory. */
#include <mpi.h>
#include <hpcmem.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <errno.h>

#define NAME 64
#define REASON 160
#define NSMALL 64

static int rank, size;

/* Every rank's verdict on one case; rank 0 prints the first failure. */
static void verdict(const char *name, const char *reason) {
  char mine[REASON] = {0}, *all = NULL;
  if (reason) snprintf(mine, sizeof mine, "rank %d: %s", rank, reason);
  if (rank == 0) all = calloc((size_t)size, REASON);
  MPI_Gather(mine, REASON, MPI_CHAR, all, REASON, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank != 0) return;
  const char *first = NULL;
  for (int r = 0; r < size && !first; r++)
    if (all[(size_t)r * REASON]) first = all + (size_t)r * REASON;
  if (first) printf("result %s fail %s\n", name, first);
  else printf("result %s ok\n", name);
  fflush(stdout);
  free(all);
}

static size_t amount(const char *list, int r) {
  size_t v = 0;
  for (int i = 0; i <= r; i++) {
    char *end;
    v = strtoul(list, &end, 10);
    if (*end != ',') break;
    list = end + 1;
  }
  return v;
}

/* The (device, inode) of the file mapped at @p addr, from /proc/self/maps. */
static int mapping_file(const void *addr, uint64_t id[2]) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  char line[512];
  int found = -1;
  while (found < 0 && fgets(line, sizeof line, f)) {
    uintptr_t lo, hi;
    unsigned maj, min;
    unsigned long long ino;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %*s %*s %x:%x %llu", &lo, &hi, &maj, &min, &ino) == 5 &&
        lo <= (uintptr_t)addr && (uintptr_t)addr < hi) {
      id[0] = (uint64_t)maj << 32 | min;
      id[1] = ino;
      found = ino != 0 ? 0 : -1;   /* inode 0: anonymous, not a node-wide file */
    }
  }
  fclose(f);
  return found;
}

/* The pattern rank r writes into its shared object: no two ranks' agree anywhere. */
#define WORDS (64 * 1024)          /* a 512 KiB object */
static uint64_t pattern(int r, size_t i) { return (uint64_t)(r + 1) << 48 | (uint64_t)0x5eed << 32 | i; }
static int holds(const uint64_t *p, int r) {
  for (size_t i = 0; i < WORDS; i++)
    if (p[i] != pattern(r, i)) return 0;
  return 1;
}

/* --- shared_segment.*: every rank puts an object into the node-shared
 * segment and tells every rank its offset */
static void shared_segment(const char *hosts, const char *me, int nrank, int nsize) {
  char why[REASON] = {0};
  hpcmem_seg_info_t info;
  int rc = hpcmem_seg_info(HPCMEM_SEG_SHARED, &info);
  if (rc != 0) snprintf(why, sizeof why, "hpcmem_seg_info: %d", rc);
  else if (!info.available || info.process_local || info.node_ranks != nsize || info.node_rank != nrank)
    snprintf(why, sizeof why, "available %d, process_local %d, node_ranks %d, node_rank %d on host %s "
             "(%d ranks there, node rank %d)", info.available, info.process_local, info.node_ranks,
             info.node_rank, me, nsize, nrank);
  verdict("shared_segment.info", why[0] ? why : NULL);

  uint64_t *obj = hpcmem_malloc_seg(WORDS * sizeof *obj, HPCMEM_SEG_SHARED);
  uint64_t off = UINT64_MAX, *offs = malloc((size_t)size * sizeof *offs);
  uint64_t file[2] = {0, 0}, *files = malloc((size_t)size * sizeof file);
  why[0] = 0;
  if (!obj) snprintf(why, sizeof why, "hpcmem_malloc_seg(shared): %s", strerror(errno));
  else if ((rc = hpcmem_seg_offset(obj, &off)) != 0) snprintf(why, sizeof why, "hpcmem_seg_offset: %d", rc);
  else if (hpcmem_seg_pointer(off) != obj) snprintf(why, sizeof why, "own offset %" PRIu64 " maps elsewhere", off);
  else if (mapping_file(obj, file) != 0) snprintf(why, sizeof why, "the shared object is not in a file mapping");
  if (obj)
    for (size_t i = 0; i < WORDS; i++) obj[i] = pattern(rank, i);
  __sync_synchronize();
  /* after this every rank's object is written */
  MPI_Allgather(&off, 1, MPI_UINT64_T, offs, 1, MPI_UINT64_T, MPI_COMM_WORLD);
  MPI_Allgather(file, 2, MPI_UINT64_T, files, 2, MPI_UINT64_T, MPI_COMM_WORLD);
  int setup_ok = !why[0];
  int all_ok;
  MPI_Allreduce(&setup_ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);

  /* one backing file per host: the same for the host's ranks, another one elsewhere */
  char map_why[REASON] = {0};
  for (int q = 0; q < size && all_ok && !map_why[0]; q++) {
    int local = strcmp(hosts + (size_t)q * NAME, me) == 0;
    int same = files[2 * q] == file[0] && files[2 * q + 1] == file[1];
    if (local != same)
      snprintf(map_why, sizeof map_why, "rank %d (host %s) maps %s file (inode %" PRIu64 ", mine %" PRIu64 ")", q,
               hosts + (size_t)q * NAME, same ? "my" : "another", files[2 * q + 1], file[1]);
  }
  verdict("shared_segment.one_mapping_per_host", !all_ok ? (why[0] ? why : "setup failed on another rank") :
          map_why[0] ? map_why : NULL);

  /* the host's other ranks' objects, read through their offsets */
  char vis[REASON] = {0}, iso[REASON] = {0};
  for (int q = 0; q < size && all_ok; q++) {
    if (q == rank) continue;
    const uint64_t *p = hpcmem_seg_pointer(offs[q]);
    if (strcmp(hosts + (size_t)q * NAME, me) == 0) {
      if (!vis[0] && (!p || !holds(p, q)))
        snprintf(vis, sizeof vis, "rank %d's object at offset %" PRIu64 " %s", q, offs[q],
                 p ? "does not hold its pattern here" : "is outside my mapping");
    } else if (!iso[0] && p && holds(p, q)) {
      snprintf(iso, sizeof iso, "rank %d of host %s: its object (offset %" PRIu64 ") is visible on host %s", q,
               hosts + (size_t)q * NAME, offs[q], me);
    }
  }
  const char *none = why[0] ? why : "setup failed on another rank";
  verdict("shared_segment.same_host_visible", !all_ok ? none : vis[0] ? vis : NULL);
  verdict("shared_segment.other_host_not_shared", !all_ok ? none : iso[0] ? iso : NULL);

  MPI_Barrier(MPI_COMM_WORLD);   /* nobody reads any more */
  if (obj && (rc = hpcmem_free_seg(obj, HPCMEM_SEG_SHARED)) != 0)
    fprintf(stderr, "mh_job: rank %d: hpcmem_free_seg: %d\n", rank, rc);
  free(offs);
  free(files);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t mib = amount(argc > 1 ? argv[1] : "8", rank);

  struct utsname u;
  char me[NAME] = {0};
  if (uname(&u) == 0) snprintf(me, sizeof me, "%s", u.nodename);
  char *hosts = malloc((size_t)size * NAME);
  MPI_Allgather(me, NAME, MPI_CHAR, hosts, NAME, MPI_CHAR, MPI_COMM_WORLD);
  if (rank == 0)
    for (int r = 0; r < size; r++) printf("host %d %s\n", r, hosts + (size_t)r * NAME);

  /* --- split_type_shared */
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int nsize, nrank;
  MPI_Comm_size(node, &nsize);
  MPI_Comm_rank(node, &nrank);
  int *members = malloc((size_t)nsize * sizeof *members);
  MPI_Allgather(&rank, 1, MPI_INT, members, 1, MPI_INT, node);
  char why[REASON] = {0};
  int same = 0;
  for (int r = 0; r < size; r++) same += strcmp(hosts + (size_t)r * NAME, me) == 0;
  if (same != nsize) snprintf(why, sizeof why, "node communicator has %d ranks, host %s has %d", nsize, me, same);
  for (int i = 0; i < nsize && !why[0]; i++)
    if (strcmp(hosts + (size_t)members[i] * NAME, me) != 0)
      snprintf(why, sizeof why, "rank %d of host %s is in the node communicator of host %s",
               members[i], hosts + (size_t)members[i] * NAME, me);
  int leader = nrank == 0, groups = 0;
  MPI_Allreduce(&leader, &groups, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("nodes %d\n", groups);
  verdict("split_type_shared", why[0] ? why : NULL);

  shared_segment(hosts, me, nrank, nsize);

  /* --- known memory for the report and the traces */
  size_t bytes = mib << 20, piece = 16 << 10;
  size_t large = bytes > NSMALL * piece ? bytes - NSMALL * piece : 0;
  char *big = malloc(large);
  char *small[NSMALL];
  if (big) memset(big, rank + 1, large);
  for (int i = 0; i < NSMALL; i++) {
    small[i] = malloc(piece);
    if (small[i]) memset(small[i], i, piece);
  }
  /* everyone holds its memory now; for 100 ms, far longer than the skew of
   * the ranks' clock alignment (the report's and the traces' job clocks) */
  MPI_Barrier(MPI_COMM_WORLD);
  struct timespec pause = {0, 100 * 1000000L};
  while (nanosleep(&pause, &pause) != 0) {}
  MPI_Barrier(MPI_COMM_WORLD);
  free(big);
  for (int i = 0; i < NSMALL; i++) free(small[i]);

  free(members);
  free(hosts);
  MPI_Comm_free(&node);
  MPI_Finalize();
  return 0;
}
