/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Test shim: glibc 2.43's x86_64 rwlock layout (see struct_mutex.h here).
 * Written for elide from the layout of glibc's
 * sysdeps/x86/nptl/bits/struct_rwlock.h at 2.43: the same 56 bytes as
 * 2.28 .. 2.42, but `signed char __rwelision; unsigned char __pad1[7]` at
 * bytes 32-39 became one `unsigned long __pad1`.  x86_64 only.
 */
#ifndef ELIDE_SHIM_GLIBC_243_STRUCT_RWLOCK_H
#define ELIDE_SHIM_GLIBC_243_STRUCT_RWLOCK_H 1

#ifndef __x86_64__
# error "this shim describes x86_64 only"
#endif

struct __pthread_rwlock_arch_t
{
  unsigned int __readers;        /* 0 */
  unsigned int __writers;        /* 4 */
  unsigned int __wrphase_futex;  /* 8 */
  unsigned int __writers_futex;  /* 12 */
  unsigned int __pad3;           /* 16 */
  unsigned int __pad4;           /* 20 */
  int __cur_writer;              /* 24 */
  int __shared;                  /* 28 */
  unsigned long int __pad1;      /* 32: was __rwelision + __pad1[7] up to 2.42 */
  unsigned long int __pad2;      /* 40 */
  unsigned int __flags;          /* 48: fixed by static initialisers */
};

#define __PTHREAD_RWLOCK_INITIALIZER(__flags) \
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, __flags

#endif
