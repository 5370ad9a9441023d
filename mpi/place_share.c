/* Node-wide placement accounting (hexe's open problem, issue 7 item 4).
 *
 * Each rank's placement layer only knows what it placed itself, so on a
 * node of 64 ranks every one of them would believe the whole HBM is free.
 * Here the ranks of a node (the layer's MPI_COMM_TYPE_SHARED communicator)
 * share one small segment, an MPI shared-memory window owned by node rank 0:
 *
 *   lock    node rank + 1 of the rank deciding now, 0 when nobody is
 *   rows    one row per node rank: the bytes it has placed on each NUMA
 *           node (OS index 0..63), written only by that rank
 *
 * A rank's decision reads the other rows (the free capacity is the class
 * capacity minus every row), and publishes its own row before it lets the
 * next rank decide, all under the lock.  Per-rank rows rather than one
 * shared total: a rank never has to undo another's arithmetic, a row is a
 * plain store, and a total is a sum of 64-bit loads away.
 *
 * The hooks run inside the allocator, from any thread, whatever MPI thread
 * level the program asked for: they touch the shared memory with atomic
 * loads and stores only and never call MPI.  The window is set up after
 * the layer has started and freed (collectively) before its communicators
 * are, with the hooks removed first so no thread is still reading it. */
#include "config.h"
#include "layer.h"
#include "place/place.h"
#include "hpcmem.h"
#include "util/log.h"
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* A rank that stops while deciding (a debugger, a crash before MPI tears
 * the job down) must not hang the node's allocations: after this long the
 * others decide without the lock. */
#define LOCK_WAIT_NS (2ull * 1000 * 1000 * 1000)

typedef struct {
  uint32_t lock;
  uint32_t nranks;
  uint64_t pad[7];   /* the rows start on a cache line of their own */
  uint64_t rows[];   /* nranks x HPCMEM_PLACE_NODES */
} seg_t;

static struct {
  MPI_Win win;
  seg_t *seg;
  int me, n;
  pid_t pid;         /* a forked child is not a rank of the node */
  int warned;
} S = {MPI_WIN_NULL, NULL, 0, 0, 0, 0};

static int ours(void) { return S.seg && getpid() == S.pid; }

static int share_others(uint64_t *per_node, int nnodes) {
  if (!ours()) return -ESRCH;
  if (nnodes > HPCMEM_PLACE_NODES) nnodes = HPCMEM_PLACE_NODES;
  memset(per_node, 0, sizeof(uint64_t) * (size_t)nnodes);
  for (int r = 0; r < S.n; r++) {
    if (r == S.me) continue;
    const uint64_t *row = S.seg->rows + (size_t)r * HPCMEM_PLACE_NODES;
    for (int nd = 0; nd < nnodes; nd++) per_node[nd] += __atomic_load_n(&row[nd], __ATOMIC_ACQUIRE);
  }
  return 0;
}

static void share_publish(const uint64_t *mine, int nnodes) {
  if (!ours()) return;
  uint64_t *row = S.seg->rows + (size_t)S.me * HPCMEM_PLACE_NODES;
  for (int nd = 0; nd < HPCMEM_PLACE_NODES; nd++)
    __atomic_store_n(&row[nd], nd < nnodes ? mine[nd] : 0, __ATOMIC_RELEASE);
}

static int share_lock(void) {
  if (!ours()) return -ESRCH;
  uint32_t want = (uint32_t)S.me + 1;
  uint64_t t0 = 0;
  for (unsigned spin = 0;; spin++) {
    uint32_t expect = 0;
    if (__atomic_compare_exchange_n(&S.seg->lock, &expect, want, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      return 0;
    if (spin < 64) continue;
    /* the holder is a process of its own: let it run (2 cores, 4 ranks...) */
    sched_yield();
    if ((spin & 255) == 0) {
      uint64_t now = hpcmem_clock_ns();
      if (!t0) t0 = now;
      else if (now - t0 > LOCK_WAIT_NS) {
        if (!S.warned) {
          S.warned = 1;
          _hpcmem_warn("placement: node rank %u has held the node's capacity lock for 2 s; "
                       "deciding without it", (unsigned)expect - 1);
        }
        return -ETIMEDOUT;
      }
    }
  }
}

static void share_unlock(void) {
  if (!S.seg) return;
  uint32_t mine = (uint32_t)S.me + 1;
  /* only ours to release: a waiter that timed out never took it */
  __atomic_compare_exchange_n(&S.seg->lock, &mine, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

int _hpcmem_place_share_start(void) {
  MPI_Comm node = _hpcmem_mpi_node_comm();
  if (node == MPI_COMM_NULL || S.win != MPI_WIN_NULL) return node == MPI_COMM_NULL ? -ENODEV : 0;
  int me, n;
  PMPI_Comm_rank(node, &me);
  PMPI_Comm_size(node, &n);
  if (n < 2) return 0;   /* alone on the node: nothing to share */
  MPI_Aint bytes = me == 0 ? (MPI_Aint)(sizeof(seg_t) + sizeof(uint64_t) * HPCMEM_PLACE_NODES * (size_t)n) : 0;
  void *base = NULL;
  MPI_Win win = MPI_WIN_NULL;
  int rc = PMPI_Win_allocate_shared(bytes, (int)sizeof(uint64_t), MPI_INFO_NULL, node, &base, &win);
  if (rc != MPI_SUCCESS) {
    _hpcmem_warn("placement: no node-shared window (MPI error %d): each rank sees only its own usage", rc);
    return -EIO;
  }
  PMPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  MPI_Aint size = 0;
  int unit = 0;
  seg_t *seg = NULL;
  rc = PMPI_Win_shared_query(win, 0, &size, &unit, &seg);
  /* a passive-target epoch for the whole life of the window: the hooks
   * then read and write it directly, synchronised by their atomics */
  int locked = 0;
  if (rc == MPI_SUCCESS) rc = PMPI_Win_lock_all(MPI_MODE_NOCHECK, win);
  if (rc == MPI_SUCCESS) locked = 1;
  if (rc == MPI_SUCCESS && me == 0 && seg) {
    memset(seg, 0, (size_t)size);
    seg->nranks = (uint32_t)n;
    PMPI_Win_sync(win);
  }
  /* every rank must agree, or the collective free at the end would hang */
  int ok = rc == MPI_SUCCESS && seg && (size_t)size >= sizeof(seg_t) + sizeof(uint64_t) * HPCMEM_PLACE_NODES * (size_t)n;
  int all = 0;
  int rc2 = PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, node);
  if (rc == MPI_SUCCESS) rc = rc2;
  if (rc != MPI_SUCCESS || !all) {
    _hpcmem_warn("placement: node-shared window unusable (MPI error %d): each rank sees only its own usage", rc);
    if (locked) PMPI_Win_unlock_all(win);
    PMPI_Win_free(&win);
    return -EIO;
  }
  PMPI_Win_sync(win);   /* rank 0's zeroes before anyone's first row */
  S.win = win;
  S.seg = seg;
  S.me = me;
  S.n = n;
  S.pid = getpid();
  static const hpcmem_place_share_t ops = {share_others, share_publish, share_lock, share_unlock};
  _hpcmem_place_set_share(&ops);   /* also publishes what was placed before MPI_Init */
  return 0;
}

void _hpcmem_place_share_stop(void) {
  if (S.win == MPI_WIN_NULL) return;
  _hpcmem_place_set_share(NULL);   /* returns once no thread is inside a hook */
  S.seg = NULL;
  PMPI_Win_unlock_all(S.win);
  PMPI_Win_free(&S.win);
  S.win = MPI_WIN_NULL;
}
