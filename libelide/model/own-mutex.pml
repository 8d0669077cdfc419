/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A default mutex (PTHREAD_MUTEX_TIMED_NP, private) taken and given by
 * libelide with glibc's own protocol, while other calls on the same mutex
 * run glibc's code (dlsym, the __pthread_* aliases, pthread_cond_wait's
 * relock).  Three threads lock it by any of the paths: thread 0 twice,
 * the others once (ITERS0, ITERS; all twice is 50M states, too many for
 * make check).
 *
 * Modelled from libelide/glibc-protocol.h and glibc-protocol.c:
 * mutex_words_take_word(), mutex_words_wait(), mutex_words_give(); from
 * libelide/fastpath.c: mutex_lock_adaptive(); from libelide/mutex.c:
 * mutex_lock_skipping_own(), mutex_skip_use(), mutex_skip_settle(); and
 * from glibc 2.36: lll_lock, __lll_lock_wait_private, lll_cond_lock,
 * lll_trylock and lll_unlock.  A change to either side must change this
 * file too.
 *
 * Checked (tests/model/check-model.sh):
 *   safety    mutual exclusion (assert), the skip count written only by the
 *             holder, and no invalid end state: no deadlock, and no thread
 *             left asleep on the futex (a lost wake-up) once the others are
 *             done; at the end the lock is free and nobody sleeps;
 *   liveness  ltl wakes: under weak fairness every futex sleeper is woken.
 *
 * Mutations (each must make a check fail):
 *   MUTATION_NO_WAKE     libelide's unlock does not wake when the word was 2
 *   MUTATION_PLAIN_TAKE  libelide takes the word with a load and a store
 *                        (the single-threaded shortcut) while threaded
 */

#ifndef ITERS
#define ITERS 1		/* acquisitions of threads 1 and 2 */
#endif
#ifndef ITERS0
#define ITERS0 2	/* thread 0's: it comes back while others wait */
#endif
#ifndef SPURIOUS
#define SPURIOUS 1	/* futex wake-ups nobody asked for (EINTR, a stale wake) */
#endif
#ifndef MAXSKIP
#define MAXSKIP 2	/* the skip lengths granted: 0 .. MAXSKIP */
#endif
#define NONE 255

byte word;		/* __lock: 0 free, 1 held, 2 held and maybe waiters */
bool asleep[3];		/* in FUTEX_WAIT on word */
byte spurious = SPURIOUS;
byte holder = NONE;	/* who is between lock and unlock */
byte skips;		/* glibc_mutex_skip_*(): __spins, libelide's burst count */
byte finished;		/* threads done */

/* FUTEX_WAIT(word, val): sleeps only if word is val, atomically. */
inline futex_wait(val)
{
	asleep[_pid] = (word == (val));
	if
	:: !asleep[_pid]	/* woken, or never slept */
	:: atomic { asleep[_pid] && spurious > 0 -> spurious--; asleep[_pid] = false }
	fi
}

/* FUTEX_WAKE(word, 1): any one sleeper, none if none sleeps. */
inline futex_wake_one()
{
	atomic {
		if
		:: asleep[0] -> asleep[0] = false
		:: asleep[1] -> asleep[1] = false
		:: asleep[2] -> asleep[2] = false
		:: else -> skip
		fi
	}
}

/* Entering and leaving the critical section: mutual exclusion. */
inline enter()
{
	atomic { assert(holder == NONE); holder = _pid }
}

inline leave()
{
	atomic { assert(holder == _pid); holder = NONE }
}

/*
 * The skip count: glibc_mutex_skip_store() only by the holder.  Each of the
 * holder's read-modify-writes is one step here, which holds only while no
 * other thread writes the count: the assertion checks that premise.
 */
inline grant()
{
	skips = 0;
	do
	:: skips < MAXSKIP -> skips++	/* mutex_skip_grant(): any length */
	:: break
	od
}

/* mutex_skip_settle(): the slow path's acquisition starts the skip that
 * grant_burst() asked for, unless another's is still running. */
inline skip_settle()
{
	atomic {
		assert(holder == _pid);
		if
		:: skips == 0 -> grant()
		:: else -> skip
		fi
	}
}

/* mutex_skip_use() and mutex_skip_renew(): the holder uses one skip; the
 * last one renews it; none left: another thread used it (mutex_skip_missed()). */
inline skip_use()
{
	atomic {
		assert(holder == _pid);
		if
		:: skips > 1 -> skips--
		:: skips == 1 -> grant()
		:: else -> skip
		fi
	}
}

/* mutex_words_take_word() and lll_lock's or lll_trylock's first step:
 * CAS 0 -> 1. */
inline take()
{
#ifdef MUTATION_PLAIN_TAKE
	ok = (word == 0);
	word = (ok -> 1 : word)
#else
	atomic { ok = (word == 0); word = (ok -> 1 : word) }
#endif
}

/*
 * The wait for a held lock: mutex_words_wait(), whose pauses (while they
 * pay) end in one more CAS 0 -> 1, else a plain look; and glibc's
 * __lll_lock_wait_private(), the same plain look.  Then both: sleep while
 * the word is 2, mark it 2 by exchange until that finds it free.
 */
inline wait()
{
	if
	:: !glibc -> atomic { seen = word; ok = (seen == 0); word = (ok -> 1 : seen) }
	:: seen = word
	fi;
	if
	:: !ok ->
		if
		:: seen == 2 -> futex_wait(2)
		:: else -> skip
		fi;
		do
		:: atomic { old = word; word = 2 };
		   if
		   :: old == 0 -> break
		   :: else -> futex_wait(2)
		   fi
		od;
		ok = true
	:: else -> skip
	fi
}

/*
 * mutex_words_give() and glibc's lll_unlock are the same steps: exchange 0,
 * and wake one if it was 2.  The mutation drops libelide's wake only.
 */
inline unlock()
{
	atomic { old = word; word = 0 };
	if
	:: old > 1 ->
#ifdef MUTATION_NO_WAKE
		if
		:: futex_wake_one()	/* glibc's unlock */
		:: skip			/* libelide's, broken */
		fi
#else
		futex_wake_one()
#endif
	:: else -> skip
	fi
}

active [3] proctype thread()
{
	byte i, seen, old;
	bool ok, trying, glibc, skipping;

	do
	:: i < (_pid == 0 -> ITERS0 : ITERS) ->
		/* How the acquisition comes to the word. */
		if
		:: skipping = (skips != 0);	/* mutex_lock_adaptive()'s racy look */
		   take()			/* ... and its CAS, or lll_lock's */
		:: take(); trying = true	/* pthread_mutex_trylock(): either */
		:: ok = false			/* mutex_acquire_watched(): seen held */
		:: atomic { old = word; word = 2; ok = (old == 0) };	/* lll_cond_lock */
		   glibc = true
		fi;
		if
		:: !ok && !trying -> wait()
		:: else -> skip
		fi;
		if
		:: ok ->
			enter();
			if
			:: skipping -> skip_use()	/* mutex_lock_skipping_own() */
			:: else ->
				if
				:: skip_settle()	/* the slow path's mutex_skip_settle() */
				:: skip
				fi
			fi;
			leave();
			unlock()
		:: else -> skip
		fi;
		atomic { seen = 0; old = 0; ok = false; trying = false; glibc = false; skipping = false; i++ }
	:: else -> break
	od;
	finished++
}

/* At the end: the lock is free and nobody sleeps on it. */
active proctype final()
{
end:	finished == 3;
	assert(word == 0 && holder == NONE && !asleep[0] && !asleep[1] && !asleep[2])
}

/* Every futex sleeper is woken (under weak fairness). */
ltl wakes { [] ((asleep[0] -> <> !asleep[0]) && (asleep[1] -> <> !asleep[1]) && (asleep[2] -> <> !asleep[2])) }
