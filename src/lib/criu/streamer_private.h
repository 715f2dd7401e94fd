#ifndef GCK_CRIU_STREAMER_PRIVATE_H
#define GCK_CRIU_STREAMER_PRIVATE_H

/*
 * What the two halves of the streamer (streamer.c captures, serve.c
 * serves) share: criu's image streamer socket (sock.c).
 */
#ifndef GCK_BUILDING_LIB
#error "streamer_private.h is the library's own"
#endif

struct gck_ctx;
struct gck_sfile;
struct pollfd;

#define GCK_SREQ_MAX	4096		/* longest request message */
#define GCK_SCHUNK	(1u << 20)
#define GCK_SPIPE	(1 << 20)	/* the pipes of pages files */

/*
 * criu's socket in the images directory, and the poll set of the loop
 * that watches it with the pipes of the files: the socket, when still
 * open, at the slot gck_sock_watch() gave it; idx[] says which file
 * each other slot stands for.
 */
struct gck_sock {
	struct gck_ctx	*ctx;
	int		 lfd, cfd;	/* listening; criu's connection */
	int		 done;		/* criu closed it */
	char		 path[PATH_MAX];
	struct pollfd	*pfd;
	size_t		*idx, pcap;
};

int	gck_sock_listen(struct gck_ctx *, const char *, const char *, char *,
	    size_t);
int	gck_sock_open(struct gck_sock *, struct gck_ctx *, const char *,
	    const char *, const char *);
void	gck_sock_close(struct gck_sock *);
void	gck_sock_free(struct gck_sock *);
int	gck_sock_room(struct gck_sock *, size_t);
size_t	gck_sock_watch(struct gck_sock *, size_t, int *);
size_t	gck_sock_add(struct gck_sock *, size_t, int, short, size_t);
int	gck_sock_poll(struct gck_sock *, size_t, int, int *);
int	gck_sock_take(struct gck_sock *, char *, size_t, int *);
int	gck_sock_recv_pipe(struct gck_ctx *, int, const char *, int *);
int	gck_sfile_room(struct gck_ctx *, struct gck_sfile *, uint64_t *);
void	gck_sfile_clear(struct gck_sfile *);

#endif /* GCK_CRIU_STREAMER_PRIVATE_H */
