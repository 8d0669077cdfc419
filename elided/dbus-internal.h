/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the files of elided's D-Bus API share, and nothing else includes:
 * dbus.c (the connection), dbus-queue.c (callers and their queues),
 * dbus-methods.c (the methods), dbus-object.c (the vtable, properties,
 * subscriptions and signals).
 */
#ifndef ELIDED_DBUS_INTERNAL_H
#define ELIDED_DBUS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

struct elided;

/* A method call waiting in its caller's queue (dbus-queue.c says how). */
struct bus_call {
	struct bus_call *next;
	sd_bus_message *m;
	struct bus_peer *peer;
	sd_bus_message_handler_t handler;
	uint64_t read_ns;            /* when sd-bus gave it to us */
};

/* What elided holds for one uid with a connection that called it. */
struct bus_uid {
	struct bus_uid *next;        /* every uid (bus_state.uids) */
	struct bus_uid *turn_next;   /* uids with calls queued, in turn */
	bool in_turn;
	uid_t uid;
	struct bus_peer *ring_head, *ring_tail; /* its connections with calls queued, in turn */
	size_t queued;               /* <= ELIDED_MAX_CALLS_PER_UID, all its connections' */
	size_t peers;                /* connections of this uid known to us */
	size_t subscribers;          /* <= ELIDED_MAX_SUBSCRIBERS_PER_UID (non-root) */
};

/* A connection (unique name) that called us, until it leaves the bus. */
struct bus_peer {
	struct bus_peer *hnext;      /* hash chain */
	struct bus_peer *snext;      /* subscribers (bus_state.subscribers) */
	struct elided *d;
	char *name;
	struct bus_uid *u;           /* NULL until the bus daemon said */
	sd_bus_slot *lookup;         /* GetConnectionUnixUser in flight */
	struct bus_call *parked, *parked_tail;
	size_t nparked;
	struct bus_call *head, *tail; /* its calls queued in its uid's queue */
	size_t nqueued;
	struct bus_peer *ring_next;  /* the uid's connections with calls queued */
	bool in_ring;
	bool subscribed;
};

#define BUS_PEER_BUCKETS 256u

struct bus_state {
	struct bus_peer *peers[BUS_PEER_BUCKETS];
	size_t npeers, nlookups, nparked;
	struct bus_uid *uids;
	struct bus_uid *turn_head, *turn_tail;
	struct bus_peer *subscribers;
	sd_event_source *work;       /* on_work(), on while calls are queued */
	sd_event_source *reconnect;  /* after the connection was lost */
	uint64_t backoff_usec;
	unsigned attempts;
	bool connected;              /* d->bus is open (not lost) */
};

/* dbus-queue.c */
/* The vtable's handler of every method: queues the call and answers later;
 * an error returned is sd-bus's to send at once. */
int bus_enqueue(sd_bus_message *m, struct elided *d, sd_bus_message_handler_t handler, sd_bus_error *error);
/* The call being run, NULL between calls: its peer knows the caller's uid. */
const struct bus_call *bus_running_call(void);
/* Runs the queued calls again, unless the socket is congested. */
void bus_arm_work(struct elided *d);
/* NameOwnerChanged: a connection that left the bus is forgotten. */
int bus_on_name_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error);
/* The source that runs the queues, off; -errno from sd-event. */
int bus_queues_init(struct elided *d);
/* Every peer, call and subscription goes (the connection is dropped). */
void bus_queues_drop(struct elided *d);
void bus_queues_free(struct bus_state *st);

/* dbus-methods.c */
/* s when it is valid UTF-8, else a copy in buf with '?' for stray bytes. */
const char *bus_string(const char *s, char *buf, size_t size);
int method_get_status(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_list_processes(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_list_observed_locks(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_list_no_segment(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_list_programs(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_get_locks(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_get_history(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_get_learned(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_list_learned(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_forget_learned(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_set_process_mode(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_reset_process(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_set_lock_mode(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_reset_lock(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_reload(sd_bus_message *m, void *userdata, sd_bus_error *error);

/* dbus-object.c */
extern const sd_bus_vtable bus_manager_vtable[];
/* p's subscription ends (Unsubscribe, or p left the bus). */
void bus_unsubscribe(struct elided *d, struct bus_peer *p);

#endif
