/* Symbolisation of return addresses recorded in traces, after the run:
 * elfutils libdw when the build has it (HAVE_LIBDW), else addr2line.
 * Each object file is opened once however many ranks' traces refer to it;
 * each (file, address) is looked up once. */
#ifndef HPCMEM_TOOLS_HMT_SYMBOLS_H
#define HPCMEM_TOOLS_HMT_SYMBOLS_H
#include <stdint.h>
#include "hmt_reader.h"

typedef struct hmt_symtab hmt_symtab_t;

typedef struct hmt_sym {
  const char *function;  /**< demangled; "0x1234" offset in the module when unknown */
  const char *file;      /**< source file of the call, in the function itself (past inlined code), or NULL */
  int line;              /**< 0 when unknown */
  const char *decl_file; /**< where the function is defined, or NULL */
  const char *module;    /**< path of the object file, or "?" */
  int known;             /**< 1 when the function name was found */
  /** Functions inlined at this address, innermost first: inl[0] is the one
   *  the address is in (its file and line: the line in it), inl[k + 1] the
   *  one inl[k] was inlined into (its line: the call of inl[k]), and the
   *  function above -- the one in the symbol table -- took inl[ninl - 1].
   *  Their own inl is NULL; inlined is 1 for them. */
  const struct hmt_sym *inl;
  int ninl;
  int inlined;
} hmt_sym_t;

enum { HMT_SYM_AUTO, HMT_SYM_LIBDW, HMT_SYM_ADDR2LINE, HMT_SYM_NONE };

hmt_symtab_t *hmt_sym_new(int method);
void hmt_sym_free(hmt_symtab_t *s);
/** Name of the method actually used ("libdw", "addr2line", "none"). */
const char *hmt_sym_method(const hmt_symtab_t *s);

/** Symbolise a return address (looked up at addr - 1) of a trace.  The
 *  result lives as long as the table. */
const hmt_sym_t *hmt_sym_lookup(hmt_symtab_t *s, const hmt_reader_t *r, uint64_t addr);

/** Warnings collected (binary changed since the run, file missing), one
 *  per module; returns the count and the i-th text. */
size_t hmt_sym_warnings(const hmt_symtab_t *s);
const char *hmt_sym_warning(const hmt_symtab_t *s, size_t i);

#endif
