#ifndef GCK_TRANSPORT_RECV_H
#define GCK_TRANSPORT_RECV_H

struct gck_ctx;

/* recv.c: gpurecv's run directory, made private if need be */
int	gck_rundir(struct gck_ctx *, char *, size_t);

#endif /* GCK_TRANSPORT_RECV_H */
