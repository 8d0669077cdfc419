/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Test shim: a made-up glibc whose x86_64 rwlock keeps its size but moves
 * __shared into the bytes where libelide keeps its rwlock indexes.  libelide
 * must refuse to compile against it (a static assertion in glibc-abi.h);
 * tests/integration/test-glibc-headers.sh checks that it does.
 */
#ifndef ELIDE_SHIM_BAD_STRUCT_RWLOCK_H
#define ELIDE_SHIM_BAD_STRUCT_RWLOCK_H 1

struct __pthread_rwlock_arch_t
{
  unsigned int __readers;        /* 0 */
  unsigned int __writers;        /* 4 */
  unsigned int __wrphase_futex;  /* 8 */
  unsigned int __writers_futex;  /* 12 */
  unsigned int __pad3;           /* 16 */
  unsigned int __pad4;           /* 20 */
  int __cur_writer;              /* 24 */
  unsigned short __pad1;         /* 28 */
  unsigned short __pad5;         /* 30 */
  unsigned short __pad6;         /* 32 */
  int __shared;                  /* 36: moved from 28 */
  unsigned long int __pad2;      /* 40 */
  unsigned int __flags;          /* 48 */
};

#define __PTHREAD_RWLOCK_INITIALIZER(__flags) \
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, __flags

#endif
