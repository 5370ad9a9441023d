/* Constant data that every process reads at start (the size-class tables,
 * the options' names and defaults, the launcher's and sysfs' names), kept
 * in one input section that src/hot-text.ld places in the code's first
 * 64 KiB window, next to the code that reads it.  The rest of .rodata (the
 * report's and the trace's text, the options' help) is then read only by a
 * process that prints or traces, and a plain process never maps its 24 KiB
 * (docs/footprint.md, "The start's constant data").
 *
 * A string literal cannot be placed so: GNU ld merges equal literals (and a
 * short one into the tail of a longer one) across the whole library, into
 * whichever .rodata section it keeps, so the start would read .rodata again.
 * HPCMEM_START_STR("...") is a char array of its own instead, usable inside
 * a function; tables are arrays of char arrays marked HPCMEM_START_RO.
 * tests/footprint/test_hot_text.sh (hot_text.rodata_unread) fails when a
 * plain process maps any page of .rodata. */
#ifndef HPCMEM_UTIL_STARTDATA_H
#define HPCMEM_UTIL_STARTDATA_H

#define HPCMEM_START_RO __attribute__((section(".rodata.hpcmem_start")))
/* text (char arrays, lists of them): byte-aligned, where the compiler
 * would align each array of 16 bytes or more to 16 or 32 (320 bytes of
 * padding in a window that has little room) */
#define HPCMEM_START_TEXT HPCMEM_START_RO __attribute__((aligned(1)))
#define HPCMEM_START_STR(s) \
  (__extension__({ static const char hpcmem_start_str_[] HPCMEM_START_TEXT = s; hpcmem_start_str_; }))

#endif
