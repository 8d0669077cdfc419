/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The callers of elided's D-Bus API and their calls, from sd-bus reading
 * a call to running it: who each connection is (its uid, asked of the bus
 * daemon), the per-uid queues and their limits, and the turns that keep
 * one user's backlog from delaying another's.
 *
 * Every method call waits in a queue of its caller's uid, and the queues
 * are served in turn, one call each (on_work()): a user who pipelines
 * thousands of calls delays another user's by one call, not by all of his.
 * Inside a uid's queue each connection has its own line, and the uid's
 * turns go to its connections in turn too: one connection's backlog delays
 * another connection of the same user by one call.  A uid's queue full
 * (ELIDED_MAX_CALLS_PER_UID), a call of a connection with fewer calls
 * waiting than the fullest one takes the place of that one's newest call,
 * which is refused as if it had come last: so every connection of the
 * user gets calls in, whatever the others pipeline.
 * A call is queued as soon as sd-bus reads it; its sender's uid is asked of
 * the bus daemon once per connection, asynchronously (a synchronous call
 * would let the whole backlog pile up behind it), and the call waits with
 * its connection ("parked") until the answer.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "dbus.h"
#include "dbus-internal.h"
#include "elided.h"
#include "log.h"
#include "macros.h"

/*
 * The call being run (run_call()): every method runs from the per-uid
 * queues below, with its caller's uid already known.
 */
static const struct bus_call *running;

const struct bus_call *bus_running_call(void)
{
	return running;
}

/* ---- peers, uids and the queues ---------------------------------------- */

static unsigned peer_hash(const char *name)
{
	unsigned h = 5381;

	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		h = h * 33 + *c;
	return h % BUS_PEER_BUCKETS;
}

static struct bus_peer *find_peer(struct bus_state *st, const char *name)
{
	for (struct bus_peer *p = st->peers[peer_hash(name)]; p; p = p->hnext)
		if (!strcmp(p->name, name))
			return p;
	return NULL;
}

static struct bus_uid *get_uid(struct bus_state *st, uid_t uid)
{
	struct bus_uid *u;

	for (u = st->uids; u; u = u->next)
		if (u->uid == uid)
			return u;
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->uid = uid;
	u->next = st->uids;
	st->uids = u;
	return u;
}

/* p, with calls queued, at the end of its uid's line of connections. */
static void ring_append(struct bus_uid *u, struct bus_peer *p)
{
	p->in_ring = true;
	p->ring_next = NULL;
	if (u->ring_tail)
		u->ring_tail->ring_next = p;
	else
		u->ring_head = p;
	u->ring_tail = p;
}

static void ring_remove(struct bus_uid *u, struct bus_peer *p)
{
	struct bus_peer *prev = NULL;

	if (!p->in_ring)
		return;
	for (struct bus_peer **pp = &u->ring_head; *pp; prev = *pp, pp = &(*pp)->ring_next)
		if (*pp == p) {
			*pp = p->ring_next;
			if (u->ring_tail == p)
				u->ring_tail = prev;
			break;
		}
	p->in_ring = false;
	p->ring_next = NULL;
}

/* u, with calls queued, at the end of the line of uids. */
static void turn_append(struct bus_state *st, struct bus_uid *u)
{
	u->in_turn = true;
	u->turn_next = NULL;
	if (st->turn_tail)
		st->turn_tail->turn_next = u;
	else
		st->turn_head = u;
	st->turn_tail = u;
}

/* Frees u once nothing refers to it (its calls went with its peers). */
static void put_uid(struct bus_state *st, struct bus_uid *u)
{
	if (u->peers || u->queued || u->in_turn)
		return;
	for (struct bus_uid **pp = &st->uids; *pp; pp = &(*pp)->next)
		if (*pp == u) {
			*pp = u->next;
			break;
		}
	free(u);
}

static void call_free(struct bus_call *c)
{
	sd_bus_message_unref(c->m);
	free(c);
}

/* Answers a call that will not run: refused, or its uid not known. */
static void call_refuse(struct bus_call *c, const char *name, const char *fmt, ...) _printf_(3, 4);

static void call_refuse(struct bus_call *c, const char *name, const char *fmt, ...)
{
	sd_bus_error error = SD_BUS_ERROR_NULL;
	va_list ap;

	va_start(ap, fmt);
	sd_bus_error_setfv(&error, name, fmt, ap);
	va_end(ap);
	(void)sd_bus_reply_method_error(c->m, &error);
	sd_bus_error_free(&error);
	call_free(c);
}

/* Replies are waiting for the socket: running calls now only makes every
 * later answer, another user's too, wait longer. */
static bool congested(struct elided *d)
{
	uint64_t n = 0;

	return d->bus && sd_bus_get_n_queued_write(d->bus, &n) >= 0 && n >= ELIDED_BUS_WQUEUE_MAX;
}

void bus_arm_work(struct elided *d)
{
	struct bus_state *st = d->bus_state;

	if (st->work && st->turn_head && !congested(d))
		sd_event_source_set_enabled(st->work, SD_EVENT_ON);
}

/*
 * A call past its uid's limit: refused, or, while replies are waiting for
 * the socket, dropped unanswered, for an error reply too would wait in
 * line ahead of other users' answers (its caller gets the bus daemon's
 * NoReply in time, and no more of its calls reach us meanwhile).
 */
static int over_limit(struct elided *d, uid_t uid, sd_bus_error *error)
{
	if (congested(d)) {
		log_uid(&d->ratelimit, uid, LOG_NOTICE,
			"uid %u has %u D-Bus calls waiting for elided; dropping more while the bus is congested",
			(unsigned)uid, ELIDED_MAX_CALLS_PER_UID);
		return 1;
	}
	return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED, "uid %u already has %u calls waiting for elided",
				 (unsigned)uid, ELIDED_MAX_CALLS_PER_UID);
}

/* Refuses c past its uid's limit (over_limit()), and frees it. */
static void refuse_over_limit(struct elided *d, struct bus_call *c)
{
	sd_bus_error error = SD_BUS_ERROR_NULL;

	if (over_limit(d, c->peer->u->uid, &error) < 0)
		(void)sd_bus_reply_method_error(c->m, &error);
	sd_bus_error_free(&error);
	call_free(c);
}

/*
 * With p's uid at its limit, the connection of that uid whose newest call
 * gives way to one of p's: the one with the most calls queued, when it has
 * at least two more than p (else p has its share already).  NULL: none.
 * A walk of the uid's connections with calls queued, at most
 * ELIDED_MAX_CALLS_PER_UID of them, only while the uid is at its limit.
 */
static struct bus_peer *displaceable(struct bus_peer *p)
{
	struct bus_peer *fullest = NULL;

	for (struct bus_peer *q = p->u->ring_head; q; q = q->ring_next)
		if (!fullest || q->nqueued > fullest->nqueued)
			fullest = q;
	return fullest && fullest != p && fullest->nqueued >= p->nqueued + 2 ? fullest : NULL;
}

/* Takes q's newest call out of the queue and refuses it. */
static void displace(struct elided *d, struct bus_peer *q)
{
	struct bus_call *c = q->head, *prev = NULL;

	while (c->next) {
		prev = c;
		c = c->next;
	}
	if (prev)
		prev->next = NULL;
	else
		q->head = NULL;
	q->tail = prev;
	q->nqueued--;
	q->u->queued--;
	if (!q->head)
		ring_remove(q->u, q);
	refuse_over_limit(d, c);
}

/* Queues c behind its connection's earlier calls; past its uid's limit it
 * takes the place of the fullest connection's newest call, or is refused. */
static void queue_call(struct elided *d, struct bus_call *c)
{
	struct bus_state *st = d->bus_state;
	struct bus_peer *p = c->peer;
	struct bus_uid *u = p->u;

	if (u->queued >= ELIDED_MAX_CALLS_PER_UID) {
		struct bus_peer *q = displaceable(p);

		if (!q) {
			refuse_over_limit(d, c);
			return;
		}
		displace(d, q);
	}
	c->next = NULL;
	if (p->tail)
		p->tail->next = c;
	else
		p->head = c;
	p->tail = c;
	p->nqueued++;
	u->queued++;
	if (!p->in_ring)
		ring_append(u, p);
	if (!u->in_turn)
		turn_append(st, u);
	bus_arm_work(d);
}


/* p left the bus (or the bus left us): nothing of it stays, its calls are
 * dropped unanswered (there is nobody to answer). */
static void peer_free(struct elided *d, struct bus_peer *p)
{
	struct bus_state *st = d->bus_state;
	struct bus_call *c, *next;

	for (struct bus_peer **pp = &st->peers[peer_hash(p->name)]; *pp; pp = &(*pp)->hnext)
		if (*pp == p) {
			*pp = p->hnext;
			break;
		}
	st->npeers--;
	if (p->lookup) {
		p->lookup = sd_bus_slot_unref(p->lookup);
		st->nlookups--;
	}
	for (c = p->parked; c; c = next) {
		next = c->next;
		call_free(c);
	}
	st->nparked -= p->nparked;
	if (p->u) {
		struct bus_uid *u = p->u;

		bus_unsubscribe(d, p);
		ring_remove(u, p);
		for (c = p->head; c; c = next) {
			next = c->next;
			call_free(c);
		}
		u->queued -= p->nqueued;
		u->peers--;
		put_uid(st, u);
	}
	free(p->name);
	free(p);
}

/* The bus daemon said who p is: its parked calls join its uid's queue. */
static int on_lookup(sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
	struct bus_peer *p = userdata;
	struct elided *d = p->d;
	struct bus_state *st = d->bus_state;
	const sd_bus_error *e = sd_bus_message_get_error(m);
	struct bus_call *c, *next;
	struct bus_uid *u = NULL;
	uint32_t uid;
	int r = 0;

	(void)ret_error;
	p->lookup = sd_bus_slot_unref(p->lookup);
	st->nlookups--;
	if (e)
		r = -sd_bus_error_get_errno(e) ?: -EIO;
	else
		r = sd_bus_message_read(m, "u", &uid);
	if (r >= 0) {
		u = get_uid(st, (uid_t)uid);
		if (!u)
			r = -ENOMEM;
	}
	if (r >= 0 && u->peers >= ELIDED_MAX_PEERS_PER_UID) {
		put_uid(st, u);
		u = NULL;
		r = -EUSERS;
	}
	c = p->parked;
	p->parked = p->parked_tail = NULL;
	st->nparked -= p->nparked;
	p->nparked = 0;
	if (r < 0) {
		/* Asked again at its next call. */
		for (; c; c = next) {
			next = c->next;
			if (r == -EUSERS)
				call_refuse(c, SD_BUS_ERROR_LIMITS_EXCEEDED,
					    "uid %u already has %u connections known to elided", (unsigned)uid,
					    ELIDED_MAX_PEERS_PER_UID);
			else
				call_refuse(c, SD_BUS_ERROR_ACCESS_DENIED,
					    "Permission denied: the caller's uid is not known (%s)",
					    e && e->message ? e->message : strerror(-r));
		}
		return 0;
	}
	p->u = u;
	u->peers++;
	for (; c; c = next) {
		next = c->next;
		queue_call(d, c);
	}
	return 0;
}

/*
 * The vtable's handler of every method: queue the call and answer later
 * (run_call()).  An error returned here is sd-bus's to send at once.
 */
int bus_enqueue(sd_bus_message *m, struct elided *d, sd_bus_message_handler_t handler, sd_bus_error *error)
{
	struct bus_state *st = d->bus_state;
	const char *sender = sd_bus_message_get_sender(m);
	struct bus_peer *p;
	struct bus_call *c;
	int r;

	if (!sender || !st)
		return sd_bus_error_setf(error, SD_BUS_ERROR_NOT_SUPPORTED, "elided answers on the bus only");
	p = find_peer(st, sender);
	if (p && p->u && p->u->queued >= ELIDED_MAX_CALLS_PER_UID && !displaceable(p))
		return over_limit(d, p->u->uid, error);
	if (p && !p->u && p->nparked >= ELIDED_MAX_PARKED_PER_PEER)
		return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
					 "%u calls of this connection already wait for its uid", ELIDED_MAX_PARKED_PER_PEER);
	if (!p && st->nlookups >= ELIDED_MAX_LOOKUPS)
		return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
					 "elided is asking the uids of %u connections already, try again",
					 ELIDED_MAX_LOOKUPS);
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return -ENOMEM;
		p->d = d;
		p->name = strdup(sender);
		if (!p->name) {
			free(p);
			return -ENOMEM;
		}
		p->hnext = st->peers[peer_hash(sender)];
		st->peers[peer_hash(sender)] = p;
		st->npeers++;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->m = sd_bus_message_ref(m);
	c->read_ns = now_ns();
	c->peer = p;
	c->handler = handler;
	if (p->u) {
		queue_call(d, c);
		return 1;
	}
	if (!p->lookup) {
		/* The bus daemon's SO_PEERCRED of the connection: its euid. */
		r = sd_bus_call_method_async(sd_bus_message_get_bus(m), &p->lookup, "org.freedesktop.DBus",
					     "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetConnectionUnixUser",
					     on_lookup, p, "s", sender);
		if (r < 0) {
			call_free(c);
			if (!p->nparked)
				peer_free(d, p);
			return sd_bus_error_set_errnof(error, r, "Cannot determine the caller's credentials: %m");
		}
		st->nlookups++;
	}
	if (p->parked_tail)
		p->parked_tail->next = c;
	else
		p->parked = c;
	p->parked_tail = c;
	p->nparked++;
	st->nparked++;
	return 1;
}

/* One call, with `running` saying whose it is; its error, if any, answered. */
static void run_call(struct elided *d, struct bus_call *c)
{
	sd_bus_error error = SD_BUS_ERROR_NULL;
	int r;

	/* A call that waited long says who kept it waiting. */
	if (now_ns() - c->read_ns > 1000000000u)
		log_debug("D-Bus call %s of uid %u waited %.0f ms to run", sd_bus_message_get_member(c->m),
			  (unsigned)c->peer->u->uid, (double)(now_ns() - c->read_ns) / 1e6);
	running = c;
	r = c->handler(c->m, d, &error);
	running = NULL;
	if (r < 0 || sd_bus_error_is_set(&error)) {
		r = sd_bus_reply_method_errno(c->m, r < 0 ? r : -EIO, &error);
		if (r < 0)
			log_debug("cannot answer %s of %s: %s", sd_bus_message_get_member(c->m), c->peer->name,
				  strerror(-r));
	}
	sd_bus_error_free(&error);
	call_free(c);
}

/* Up to ELIDED_BUS_BATCH calls, one of each uid in turn, and of each of
 * a uid's connections in turn. */
static int on_work(sd_event_source *s, void *userdata)
{
	struct elided *d = userdata;
	struct bus_state *st = d->bus_state;

	for (unsigned n = 0; n < ELIDED_BUS_BATCH && st->turn_head && !congested(d); n++) {
		struct bus_uid *u = st->turn_head;
		struct bus_peer *p = u->ring_head;
		struct bus_call *c;

		st->turn_head = u->turn_next;
		if (!st->turn_head)
			st->turn_tail = NULL;
		u->in_turn = false;
		if (!p) {
			/* Its calls went with their connections (peer_free). */
			put_uid(st, u);
			continue;
		}
		c = p->head;
		p->head = c->next;
		if (!p->head)
			p->tail = NULL;
		p->nqueued--;
		u->queued--;
		/* Both back in line behind the others before the call runs:
		 * a call that frees its own peer or uid finds them in no line. */
		u->ring_head = p->ring_next;
		if (!u->ring_head)
			u->ring_tail = NULL;
		p->in_ring = false;
		p->ring_next = NULL;
		if (p->head)
			ring_append(u, p);
		if (u->ring_head)
			turn_append(st, u);
		run_call(d, c);
		put_uid(st, u);
	}
	/* Again once the socket took the replies (elided_bus_drain). */
	if (!st->turn_head || congested(d))
		sd_event_source_set_enabled(s, SD_EVENT_OFF);
	return 0;
}

int bus_queues_init(struct elided *d)
{
	struct bus_state *st = d->bus_state;
	int r;

	r = sd_event_add_defer(d->event, &st->work, on_work, d);
	if (r >= 0)
		r = sd_event_source_set_enabled(st->work, SD_EVENT_OFF);
	return r;
}

void bus_queues_drop(struct elided *d)
{
	struct bus_state *st = d->bus_state;

	for (unsigned i = 0; st && i < BUS_PEER_BUCKETS; i++)
		while (st->peers[i])
			peer_free(d, st->peers[i]);
	/* No calls are left: no uid is anyone's turn. */
	while (st && st->turn_head) {
		struct bus_uid *u = st->turn_head;

		st->turn_head = u->turn_next;
		u->in_turn = false;
		put_uid(st, u);
	}
	if (st)
		st->turn_tail = NULL;
	if (st && st->work)
		sd_event_source_set_enabled(st->work, SD_EVENT_OFF);
}

void bus_queues_free(struct bus_state *st)
{
	for (struct bus_uid *u = st->uids, *next; u; u = next) {
		next = u->next;
		free(u);
	}
	sd_event_source_unref(st->work);
}

/* A name left the bus: a unique name is a connection, and its peer goes. */
int bus_on_name_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
	struct elided *d = userdata;
	const char *name, *old_owner, *new_owner;
	struct bus_peer *p;

	(void)ret_error;
	if (!d->bus_state || sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0)
		return 0;
	if (name[0] != ':' || *new_owner)
		return 0;
	p = find_peer(d->bus_state, name);
	if (p) {
		if (p->subscribed)
			log_debug("D-Bus subscriber %s (uid %u) disconnected", p->name, (unsigned)p->u->uid);
		peer_free(d, p);
	}
	return 0;
}
