/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read side of a default rwlock (prefers readers) taken and given by
 * libelide, beside glibc's readers and writers on the same lock.  Three
 * threads, each reading or writing: thread 0 twice, the others once
 * (ITERS0, ITERS).
 *
 * Modelled from libelide/glibc-protocol.h: rwlock_read_take() (with
 * glibc-protocol.c's rwlock_read_registered_late()), rwlock_read_give()
 * and their callers real_rwlock_rdlock() and real_rwlock_unlock(); and from
 * glibc 2.36 (nptl/pthread_rwlock_common.c): the read lock (fetch-add, a
 * read phase started from a write phase without a writer, the wait for the
 * hand-over on __wrphase_futex), the read unlock (the last reader hands
 * over to a writer), the write lock (WRLOCKED, the wait on
 * __writers_futex, a write phase started or handed over by the readers)
 * and the write unlock (the read phase handed over to registered
 * readers).  A change to either side must change this file too.
 *
 * Not modelled: RWAITING (set only by the readers of a rwlock that prefers
 * writers nonrecursively, which libelide leaves to glibc whole), writer to
 * writer hand-over (__writers, only where writers are preferred), time-outs,
 * the reader count's overflow, and weak CAS failing spuriously: a CAS loop
 * whose new value depends only on the value it saw is one step here.
 *
 * Checked (tests/model/check-model.sh):
 *   safety    a writer excludes everyone (assert), a writer holds the lock
 *             in a write phase only (what rwlock_read_give() relies on), and
 *             no invalid end state: no deadlock, and no thread left asleep
 *             on a futex (a lost wake-up); at the end the lock is free;
 *   liveness  ltl wakes: under weak fairness every futex sleeper is woken.
 *
 * Mutations (each must make a check fail):
 *   MUTATION_NO_HANDOVER  libelide's last reader leaves without handing over
 *                         to the waiting writer
 *   MUTATION_TAKE_WRPHASE libelide's reader holds the lock whatever phase
 *                         its fetch-add found
 *   MUTATION_LATE_HOLD    ... or, having left the writer's phase again,
 *                         holds it without glibc's wait
 *   MUTATION_LATE_NO_WAKE the reader that starts a read phase after its
 *                         fetch-add does not wake the readers waiting for it
 *   MUTATION_LATE_UNMARKED the reader handed the read phase meanwhile sleeps
 *                         for the hand-over without marking __wrphase_futex
 *                         used (so the writer does not wake it)
 */

#ifndef ITERS
#define ITERS 1
#endif
#ifndef ITERS0
#define ITERS0 2
#endif
#ifndef SPURIOUS
#define SPURIOUS 1	/* futex wake-ups nobody asked for */
#endif
#define NONE 255

/* __readers: the reader count from bit 3 up, and below it: */
#define WRPHASE 1	/* a write phase */
#define WRLOCKED 2	/* a writer holds the lock or waits for it */
#define RWAITING 4	/* never set here (see above) */
#define ONE 8		/* 1 << PTHREAD_RWLOCK_READER_SHIFT */
#define USED 2		/* PTHREAD_RWLOCK_FUTEX_USED */

/* The futexes a thread may sleep on. */
#define F_WRPHASE 1	/* __wrphase_futex */
#define F_WRITERS 2	/* __writers_futex */

byte readers;		/* __readers */
byte wrphase_futex;	/* 1 in a write phase, | USED when someone may sleep */
byte writers_futex;	/* 1 while a writer holds WRLOCKED, | USED */
byte cur_writer = NONE;	/* __cur_writer */
byte asleep[3];		/* the futex a thread sleeps on, 0 awake */
byte spurious = SPURIOUS;
byte nread, nwrite;	/* threads between lock and unlock */
byte finished;

/* FUTEX_WAIT(f, val): sleeps only if the word is val, atomically. */
inline futex_wait(f, fword, val)
{
	asleep[_pid] = ((fword) == (val) -> f : 0);
	if
	:: asleep[_pid] == 0
	:: atomic { asleep[_pid] != 0 && spurious > 0 -> spurious--; asleep[_pid] = 0 }
	fi
}

/* FUTEX_WAKE(f, INT_MAX) */
inline futex_wake_all(f)
{
	d_step {
		asleep[0] = (asleep[0] == f -> 0 : asleep[0]);
		asleep[1] = (asleep[1] == f -> 0 : asleep[1]);
		asleep[2] = (asleep[2] == f -> 0 : asleep[2])
	}
}

/* FUTEX_WAKE(f, 1) */
inline futex_wake_one(f)
{
	atomic {
		if
		:: asleep[0] == f -> asleep[0] = 0
		:: asleep[1] == f -> asleep[1] = 0
		:: asleep[2] == f -> asleep[2] = 0
		:: else -> skip
		fi
	}
}

/* rwlock_read_take(): a look; in a read phase glibc's fetch-add, which
 * holds the lock if it left a read phase; else (a writer came between the
 * look and the add) rwlock_read_registered_late(): start the read phase if
 * no writer is there, else leave while the write phase lasts and wait in
 * glibc's read lock, or, handed the read phase meanwhile, sleep until the
 * writer's hand-over is complete.  ok: the lock is held; false: nothing
 * written, glibc's read lock is next. */
inline elide_take()
{
	r = readers;
	if
	:: (r & WRPHASE) != 0 -> ok = false
	:: else ->
		atomic { readers = readers + ONE; r = readers };
#ifdef MUTATION_TAKE_WRPHASE
		ok = true;
#else
		ok = ((r & WRPHASE) == 0);
#endif
		do
		:: !ok && (r & WRPHASE) != 0 && (r & WRLOCKED) == 0 ->
			atomic { ok = (readers == r); r = readers; readers = (ok -> r ^ WRPHASE : r) };
			if
			:: ok ->
				atomic { old = wrphase_futex; wrphase_futex = 0 };
				if
#ifndef MUTATION_LATE_NO_WAKE
				:: (old & USED) != 0 -> futex_wake_all(F_WRPHASE)
#endif
				:: else -> skip
				fi
			:: else -> skip
			fi
		:: else -> break
		od;
		if
		:: !ok ->
			do
			:: (r & WRPHASE) != 0 ->
				atomic { ok = (readers == r); r = readers; readers = (ok -> r - ONE : r) };
				if
				:: ok -> break
				:: else -> skip
				fi
			:: else -> break
			od;
			if
#ifdef MUTATION_LATE_HOLD
			:: ok -> skip
#else
			:: ok -> glibc_rdlock()		/* left again: glibc's wait */
#endif
			:: else ->	/* ours, once handed over: sleep for it, as glibc's reader */
				do
				:: w = wrphase_futex;
				   if
				   :: (w | USED) != (1 | USED) -> break
				   :: else ->
#ifdef MUTATION_LATE_UNMARKED
					ok = true;
#else
					if
					:: (w & USED) == 0 ->
						atomic { ok = (wrphase_futex == w); wrphase_futex = (ok -> w | USED : wrphase_futex) }
					:: else -> ok = true
					fi;
#endif
					if
#ifdef MUTATION_LATE_UNMARKED
					:: ok -> futex_wait(F_WRPHASE, wrphase_futex, w)
#else
					:: ok -> futex_wait(F_WRPHASE, wrphase_futex, 1 | USED)
#endif
					:: else -> skip
					fi
				   fi
				od;
				w = 0
			fi;
			ok = true
		:: else -> skip
		fi
	fi
}

/* rwlock_read_give(): one CAS that leaves as a reader, unless in a write
 * phase (the writer's own unlock) or the last reader must hand over. */
inline elide_give()
{
	atomic {
		r = readers;
#ifdef MUTATION_NO_HANDOVER
		ok = ((r & WRPHASE) == 0 && (r / ONE) != 0);
#else
		ok = ((r & WRPHASE) == 0 && (r / ONE) != 0 &&
		      !((r / ONE) == 1 && (r & (WRLOCKED | RWAITING)) != 0));
#endif
		readers = (ok -> r - ONE : r)
	}
}

/* glibc's read lock. */
inline glibc_rdlock()
{
	atomic { readers = readers + ONE; r = readers };
	ok = ((r & WRPHASE) == 0);	/* registered in a read phase: done */
	/* A write phase without a writer: start the read phase. */
	do
	:: !ok && (r & WRPHASE) != 0 && (r & WRLOCKED) == 0 ->
		atomic { ok = (readers == r); r = readers; readers = (ok -> r ^ WRPHASE : r) };
		if
		:: ok ->
			atomic { old = wrphase_futex; wrphase_futex = 0 };
			if
			:: (old & USED) != 0 -> futex_wake_all(F_WRPHASE)
			:: else -> skip
			fi
		:: else -> skip
		fi
	:: else -> break
	od;
	/* Else wait for the writer to hand the read phase over. */
	if
	:: !ok ->
		do
		:: w = wrphase_futex;
		   if
		   :: (w | USED) == (1 | USED) ->
			if
			:: (w & USED) == 0 ->
				atomic { ok = (wrphase_futex == w); wrphase_futex = (ok -> w | USED : wrphase_futex) }
			:: else -> ok = true
			fi;
			if
			:: ok -> futex_wait(F_WRPHASE, wrphase_futex, 1 | USED); ok = false
			:: else -> skip
			fi
		   :: else ->
			if
			:: ready -> break
			:: else -> ready = ((readers & WRPHASE) == 0)
			fi
		   fi
		od
	:: else -> skip
	fi;
	atomic { r = 0; w = 0; old = 0; ok = false; ready = false }
}

/* glibc's read unlock: the last reader hands over to a writer. */
inline glibc_rdunlock()
{
	atomic {
		r = readers - ONE;
		r = ((r / ONE) == 0 && (r & WRLOCKED) != 0 -> r | WRPHASE : r);
		r = ((r / ONE) == 0 -> r & ~RWAITING : r);
		readers = r
	};
	if
	:: (r & WRPHASE) != 0 ->
		atomic { old = wrphase_futex; wrphase_futex = 1 };
		if
		:: (old & USED) != 0 -> futex_wake_all(F_WRPHASE)
		:: else -> skip
		fi
	:: else -> skip
	fi;
	atomic { r = 0; old = 0 }
}

/* glibc's write lock (a rwlock that prefers readers). */
inline glibc_wrlock()
{
	atomic { r = readers; readers = readers | WRLOCKED };
	if
	:: (r & WRLOCKED) != 0 ->
		/* Another writer: take WRLOCKED once it is free, else sleep
		 * on __writers_futex while a writer holds it. */
		do
		:: (r & WRLOCKED) == 0 ->
			atomic { ok = (readers == r); r = readers; readers = (ok -> r | WRLOCKED : r) };
			if
			:: ok -> break
			:: else -> skip
			fi
		:: else ->
			w = writers_futex;
			if
			:: (w & ~USED) != 1 -> r = readers
			:: else ->
				if
				:: w != (1 | USED) ->
					atomic { ok = (writers_futex == w); writers_futex = (ok -> 1 | USED : writers_futex) }
				:: else -> ok = true
				fi;
				if
				:: ok ->
					shares = true;
					futex_wait(F_WRITERS, writers_futex, 1 | USED)
				:: else -> skip
				fi;
				ok = false;
				r = readers
			fi
		od;
		r = r | WRLOCKED
	:: else -> skip
	fi;
	writers_futex = 1 | (shares -> USED : 0);
	ok = ((r & WRPHASE) != 0);	/* a write phase without a writer: ours */
	/* No readers: start a write phase. */
	do
	:: !ok && (r & WRPHASE) == 0 && (r / ONE) == 0 ->
		atomic { ok = (readers == r); r = readers; readers = (ok -> r | WRPHASE : r) };
		if
		:: ok -> wrphase_futex = 1
		:: else -> skip
		fi
	:: else -> break
	od;
	/* Else wait for the last reader to hand the write phase over. */
	if
	:: !ok ->
		do
		:: w = wrphase_futex;
		   if
		   :: (w | USED) == USED ->
			if
			:: (w & USED) == 0 ->
				atomic { ok = (wrphase_futex == w); wrphase_futex = (ok -> USED : wrphase_futex) }
			:: else -> ok = true
			fi;
			if
			:: ok -> futex_wait(F_WRPHASE, wrphase_futex, USED); ok = false
			:: else -> skip
			fi
		   :: else ->
			if
			:: ready -> break
			:: else -> ready = ((readers & WRPHASE) != 0)
			fi
		   fi
		od
	:: else -> skip
	fi;
	cur_writer = _pid;
	atomic { r = 0; w = 0; ok = false; ready = false; shares = false }
}

/* glibc's write unlock (prefers readers: no writer to writer hand-over). */
inline glibc_wrunlock()
{
	cur_writer = NONE;
	atomic { old = writers_futex; writers_futex = 0 };
	atomic {
		r = readers;
		readers = (r ^ WRLOCKED) ^ ((r / ONE) == 0 -> 0 : WRPHASE)
	};
	/* Registered readers: the read phase is theirs. */
	if
	:: (r / ONE) != 0 ->
		atomic { w = wrphase_futex; wrphase_futex = 0 };
		if
		:: (w & USED) != 0 -> futex_wake_all(F_WRPHASE)
		:: else -> skip
		fi
	:: else -> skip
	fi;
	if
	:: (old & USED) != 0 -> futex_wake_one(F_WRITERS)
	:: else -> skip
	fi;
	atomic { r = 0; w = 0; old = 0 }
}

/* pthread_rwlock_unlock(): glibc's tells its writer by __cur_writer. */
inline glibc_unlock()
{
	if
	:: cur_writer == _pid -> glibc_wrunlock()
	:: cur_writer != _pid -> glibc_rdunlock()	/* no else: it would leak to the caller's if */
	fi
}

active [3] proctype thread()
{
	byte i, r, w, old;
	bool ok, ready, shares;

	do
	:: i < (_pid == 0 -> ITERS0 : ITERS) ->
		if
		:: true ->	/* a reader */
			if
			:: elide_take();	/* real_rwlock_rdlock() */
			   if
			   :: !ok -> glibc_rdlock()
			   :: else -> skip
			   fi
			:: glibc_rdlock()	/* glibc's, called directly */
			fi;
			atomic { assert(nwrite == 0); nread++; ok = false; r = 0 };
			nread--;
			if
			:: elide_give();	/* real_rwlock_unlock() */
			   if
			   :: !ok -> glibc_unlock()
			   :: else -> skip
			   fi
			:: glibc_unlock()
			fi
		:: true ->	/* a writer: glibc's */
			glibc_wrlock();
			atomic {
				assert(nwrite == 0 && nread == 0);
				assert((readers & (WRPHASE | WRLOCKED)) == (WRPHASE | WRLOCKED));
				nwrite++
			};
			nwrite--;
			if
			:: elide_give();	/* real_rwlock_unlock(): a write phase, to glibc */
			   assert(!ok);
			   glibc_unlock()
			:: glibc_unlock()
			fi
		fi;
		atomic { ok = false; r = 0; i++ }
	:: else -> break
	od;
	finished++
}

/* At the end: the lock is free (no reader, no writer, and a write phase
 * left by the last writer is harmless), and nobody sleeps. */
active proctype final()
{
end:	finished == 3;
	assert((readers & ~WRPHASE) == 0 && cur_writer == NONE);
	assert(asleep[0] == 0 && asleep[1] == 0 && asleep[2] == 0)
}

/* Every futex sleeper is woken (under weak fairness). */
ltl wakes { [] ((asleep[0] != 0 -> <> (asleep[0] == 0)) && (asleep[1] != 0 -> <> (asleep[1] == 0)) &&
		(asleep[2] != 0 -> <> (asleep[2] == 0))) }
