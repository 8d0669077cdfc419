/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Test shim: glibc 2.43's x86_64 mutex layout, for building libelide as if
 * against glibc 2.43 (tests/integration/test-glibc-headers.sh puts this
 * directory first on the include path).  Written for elide from the layout
 * of glibc's sysdeps/x86/nptl/bits/struct_mutex.h at 2.43 (the glibc
 * development branch after the 2.42 tag): the same 40 bytes as 2.28 .. 2.42,
 * but the `short __elision` at byte 22 is now `short __unused`.  x86_64 only.
 */
#ifndef ELIDE_SHIM_GLIBC_243_STRUCT_MUTEX_H
#define ELIDE_SHIM_GLIBC_243_STRUCT_MUTEX_H 1

#ifndef __x86_64__
# error "this shim describes x86_64 only"
#endif

struct __pthread_mutex_s
{
  int __lock;                 /* 0 */
  unsigned int __count;       /* 4 */
  int __owner;                /* 8 */
  unsigned int __nusers;      /* 12 */
  int __kind;                 /* 16: fixed by static initialisers */
  short __spins;              /* 20 */
  short __unused;             /* 22: was __elision up to 2.42 */
  __pthread_list_t __list;    /* 24 */
};
#define __PTHREAD_MUTEX_HAVE_PREV 1

#define __PTHREAD_MUTEX_INITIALIZER(__kind) \
  0, 0, 0, 0, __kind, 0, 0, { 0, 0 }

#endif
