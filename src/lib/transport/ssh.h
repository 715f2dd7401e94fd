#ifndef GCK_TRANSPORT_SSH_H
#define GCK_TRANSPORT_SSH_H

struct gck_ctx;
struct gck_ssh;

/*
 * ssh.c: an SSH client connection with one exec channel.  Each
 * connection is used by one thread at a time; connections are
 * independent of each other.  After a failure, a connection is good only
 * for gck_ssh_exit_status(), gck_ssh_stderr() and gck_ssh_close().
 */
struct gck_ssh;
struct gck_ssh_opts {
	const char	*host;		/* name or address */
	const char	*user;		/* NULL: the local user's name */
	int		 port;		/* 0: 22 */
	const char	*identity;	/* -i: a private key file, or NULL */
	const char	*known_hosts;	/* NULL: ~/.ssh/known_hosts */
	const char	*agent;		/* NULL: $SSH_AUTH_SOCK; "none": none */
	int		 accept_new;	/* add an unknown host's key */
	unsigned int	 timeout_ms;	/* connect timeout, and the longest any
					   later read or write may wait with
					   no progress (0: no limit) */
};

/*
 * Connects, checks the host key against known_hosts and logs in with a
 * public key (ssh-agent, then opts->identity or the usual key files).
 * Returns GCK_OK with *sp set, or GCK_ESSH, GCK_ETIMEDOUT, GCK_EINTR...
 */
int	 gck_ssh_connect(struct gck_ctx *, const struct gck_ssh_opts *,
	    struct gck_ssh **);
/* Runs command on a new session channel.  Returns GCK_OK or a code. */
int	 gck_ssh_exec(struct gck_ctx *, struct gck_ssh *, const char *);
/* Writes all of buf to the command's stdin.  Returns GCK_OK or a code. */
int	 gck_ssh_write(struct gck_ctx *, struct gck_ssh *, const void *,
	    size_t);
/* Reads its stdout: returns >0 bytes, 0 at EOF, or a negative code. */
ssize_t	 gck_ssh_read(struct gck_ctx *, struct gck_ssh *, void *, size_t);
/* Reads exactly len bytes; GCK_ETRUNC at an early EOF. */
int	 gck_ssh_read_full(struct gck_ctx *, struct gck_ssh *, void *,
	    size_t);
/*
 * Returns 1 if gck_ssh_read() would return at once (stdout data waiting,
 * its EOF or a failure), else 0; never blocks.
 */
int	 gck_ssh_pending(struct gck_ssh *);
/* Closes the command's stdin.  Returns GCK_OK or a code. */
int	 gck_ssh_send_eof(struct gck_ctx *, struct gck_ssh *);
/*
 * Returns the command's exit status (128 + N when killed by signal N),
 * waiting up to wait_ms for the remote to close the channel, or -1 if
 * it is not known by then.
 */
int	 gck_ssh_exit_status(struct gck_ssh *, int);
/* The last non-empty line the command wrote on stderr, "" if none. */
const char *gck_ssh_stderr(const struct gck_ssh *);
/* "user@host[:port]", as the messages name the connection. */
const char *gck_ssh_name(const struct gck_ssh *);
/* Disconnects and frees; NULL is fine. */
void	 gck_ssh_close(struct gck_ssh *);

#endif /* GCK_TRANSPORT_SSH_H */
