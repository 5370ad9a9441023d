/* Inside src/topo: the machine as the thread groups see it.
 *
 * Two readers describe the machine: Linux sysfs at start (sysfs.c: raw
 * open/read, no heap, no stdio) and hwloc (topo.c, loaded with dlopen when
 * something needs more than cpus and NUMA nodes).  Both fill the same
 * neutral description -- the NUMA nodes with their cpus, the cpus in
 * topology order, and for every cpu and level the "leader" of the object
 * holding it (its smallest cpu number; -1 when no object of that level holds
 * the cpu) -- and one code path in topo.c turns that into cpu -> node and
 * cpu -> group, so both readers give the same groups for the same machine. */
#ifndef HPCMEM_TOPO_MACHINE_H
#define HPCMEM_TOPO_MACHINE_H

/* Candidate levels for thread groups, finest first. */
enum {
  TOPO_LV_PU = 0,
  TOPO_LV_CORE,
  TOPO_LV_L1,        /* L1 data (or unified) cache; L2 .. L5 follow */
  TOPO_LV_L5 = TOPO_LV_L1 + 4,
  TOPO_LV_NUMA,      /* derived from cpu -> node, never set by a reader */
  TOPO_LV_PACKAGE,
  TOPO_LV_MACHINE,   /* derived: every cpu */
  TOPO_LEVELS
};

/* Forget the description (and the loaded topology). */
void _hpcmem_topo_desc_reset(void);
/* A NUMA node and its cpus (bit = OS cpu number, HPCMEM_TOPO_MAX_CPUS bits):
 * 0, or -ENOSPC beyond HPCMEM_TOPO_MAX_NODES / HPCMEM_TOPO_MAX_NODE_OS. */
int _hpcmem_topo_desc_node(int os_index, const unsigned long *cpus);
/* The next cpu (OS number); in topology order, or any order followed by
 * _hpcmem_topo_desc_sort(). */
void _hpcmem_topo_desc_cpu(int os);
/* The leader of the object of `level` that holds cpu. */
void _hpcmem_topo_desc_lead(int cpu, int level, int leader);
int _hpcmem_topo_desc_get_lead(int cpu, int level);
/* cpu -> node (the narrowest node holding the cpu), then, for a reader that
 * cannot tell the topology order, the cpus sorted as hwloc orders its PUs
 * (by the leaders from the package down to the core: siblings ordered by
 * their first cpu), then the level widths and the default groups.  The
 * description becomes the loaded topology; `source` names it. */
void _hpcmem_topo_desc_finish(const char *source, int sort);

/* Fill the description from the Linux file system below root ("/" for this
 * machine; tests give a fake tree): 0, or -errno when it cannot be read
 * (the caller then asks hwloc). */
int _hpcmem_topo_sysfs_read(const char *root);
/* Files the sysfs reader has opened so far (for tests: each costs a start
 * several microseconds). */
extern int _hpcmem_topo_sysfs_files;

#endif
