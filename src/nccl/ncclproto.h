/*
 * ncclproto.h: what libgpuckpt-nccl.so (src/nccl/gpuckpt-nccl.c), loaded
 * into an NCCL job's ranks, and gpuckpt (src/lib/ops/nccl.c) say to each
 * other.  Shared by both; nothing else.
 *
 * A rank listens, from its first NCCL call, on an abstract Unix stream
 * socket named GCK_NCCL_PREFIX, its PID as it sees it, a dot and 16 hex
 * digits of its own choosing.  gpuckpt finds it among the sockets of the
 * process's descriptors (/proc/PID/fd against /proc/PID/net/unix), so
 * that neither PID namespaces nor a second rank of the same PID get in
 * the way.  One connection at a time; a request is a line, its answer
 * one or more lines:
 *
 *	hold		-> "held OPS NCOMM" and NCOMM lines
 *			   "comm ID NRANKS RANK COLLS", then "end"
 *		No operation starts from now on: the rank stays at OPS,
 *		the NCCL operations it has begun (a collective or a
 *		point-to-point call outside a group, a group, a
 *		communicator's creation).  COLLS: the collectives it has
 *		begun on communicator ID (a hash of its unique ID).
 *	park T		-> "parked OPS NCOMM", the comm lines, "end";
 *			   or "beyond OPS"
 *		Operations start again until the rank has begun T; it is
 *		parked once it has and none is under way.
 *	prepare S	-> "prepared", or "failed WHY", or "noshim"
 *		ncclCheckpointPrepare() of NCCL's checkpoint shim (its
 *		contrib/nccl_checkpoint) tears the communicators down.
 *		The rank stays parked after the connection ends, for S
 *		seconds at most (0: for as long as it takes), and then
 *		rebuilds on its own.
 *	resume		-> "resumed", or "failed WHY"
 *		ncclCheckpointRestore() rebuilds what prepare tore down,
 *		and operations start again.
 *	state		-> "state running|held|parked|prepared OPS"
 *	bye		the connection ends (the rank closes it first).
 *
 * A connection that ends while the rank is held or parked but not
 * prepared lets it run on: a gpuckpt that dies or gives up leaves the
 * job as it was.
 */
#ifndef GCK_NCCLPROTO_H
#define GCK_NCCLPROTO_H

#define GCK_NCCL_PREFIX		"gpuckpt-nccl."
#define GCK_NCCL_LINE		256	/* the longest line either sends */
#define GCK_NCCL_MAXCOMM	64	/* communicators a rank reports */

#endif /* GCK_NCCLPROTO_H */
