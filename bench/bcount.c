/*
 * bcount -- copy standard input to standard output and count the bytes.
 *
 * usage: bcount file
 *        bcount -r listen-port to-port file
 *
 * The benchmark puts it between the two ends of each pipeline, so that
 * the same relay measures the bytes on the wire of every variant.  At end
 * of input, or when the output is closed, the count is written to FILE in
 * decimal.  Exits 0 once everything read was written, 1 otherwise.
 *
 * With -r it is a TCP relay instead, for the variants that open their
 * own connections (gpusend): it listens on 127.0.0.1:LISTEN-PORT (0: any
 * free port), writes the port it got to FILE.port, and relays every
 * connection it accepts to 127.0.0.1:TO-PORT, counting the bytes in both
 * directions.  On SIGTERM or SIGINT it writes the count to FILE and
 * exits 0.
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <sys/types.h>
#include <sys/socket.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUFSZ	(1024 * 1024)

static int	put_count(const char *, unsigned long long);
static int	relay(int, char *[]);

/* Writes n to path; returns 0, or -1 with errno set. */
static int
put_count(const char *path, unsigned long long n)
{
	char	buf[32];
	int	fd, len, r = 0;

	len = snprintf(buf, sizeof buf, "%llu\n", n);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0644)) == -1)
		return -1;
	if (write(fd, buf, len) != len)
		r = -1;
	if (close(fd) == -1)
		r = -1;
	return r;
}

int
main(int argc, char *argv[])
{
	unsigned long long	 total = 0;
	char			*buf;
	ssize_t			 n, w, off;
	int			 status = 0;

	if (argc == 5 && strcmp(argv[1], "-r") == 0)
		return relay(argc, argv);
	if (argc != 2) {
		fprintf(stderr, "usage: bcount file\n"
		    "       bcount -r listen-port to-port file\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if ((buf = malloc(BUFSZ)) == NULL) {
		fprintf(stderr, "bcount: out of memory\n");
		return 1;
	}
	for (;;) {
		n = read(STDIN_FILENO, buf, BUFSZ);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			fprintf(stderr, "bcount: read: %s\n", strerror(errno));
			status = 1;
			break;
		}
		if (n == 0)
			break;
		for (off = 0; off < n; off += w) {
			w = write(STDOUT_FILENO, buf + off, n - off);
			if (w == -1 && errno == EINTR) {
				w = 0;
				continue;
			}
			if (w == -1) {
				fprintf(stderr, "bcount: write: %s\n",
				    strerror(errno));
				status = 1;
				goto out;
			}
			total += (unsigned long long)w;
		}
	}
out:
	free(buf);
	if (put_count(argv[1], total) == -1) {
		fprintf(stderr, "bcount: %s: %s\n", argv[1], strerror(errno));
		status = 1;
	}
	return status;
}

/* --- the TCP relay ------------------------------------------------------ */

#define MAXCONN	64
#define RBUFSZ	(256 * 1024)

/* One direction of a relayed connection: from fd in to fd out. */
struct half {
	int	 in, out;
	char	*buf;
	size_t	 off, len;
	int	 eof;		/* in said end of file */
	int	 done;		/* and all of it was written, out shut down */
};

struct conn {
	int		used;
	int		fd[2];	/* accepted, connected */
	struct half	h[2];	/* fd[0] -> fd[1], fd[1] -> fd[0] */
};

static volatile sig_atomic_t	stop;

static void
on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

static void
conn_close(struct conn *c)
{
	close(c->fd[0]);
	close(c->fd[1]);
	free(c->h[0].buf);
	free(c->h[1].buf);
	memset(c, 0, sizeof *c);
}

/* Moves what it can of one half; returns -1 when the connection broke. */
static int
half_move(struct half *h, short rev_in, short rev_out,
    unsigned long long *total)
{
	ssize_t	n;

	if (h->done)
		return 0;
	if (h->len == 0 && !h->eof && (rev_in & (POLLIN | POLLHUP | POLLERR))) {
		n = read(h->in, h->buf, RBUFSZ);
		if (n == -1 && (errno == EINTR || errno == EAGAIN))
			return 0;
		if (n == -1)
			return -1;
		if (n == 0)
			h->eof = 1;
		h->off = 0;
		h->len = (size_t)n;
	}
	if (h->len > 0 && (rev_out & (POLLOUT | POLLERR | POLLHUP))) {
		n = write(h->out, h->buf + h->off, h->len);
		if (n == -1 && (errno == EINTR || errno == EAGAIN))
			return 0;
		if (n == -1)
			return -1;
		h->off += (size_t)n;
		h->len -= (size_t)n;
		*total += (unsigned long long)n;
	}
	if (h->eof && h->len == 0) {
		shutdown(h->out, SHUT_WR);
		h->done = 1;
	}
	return 0;
}

static int
relay(int argc, char *argv[])
{
	static struct conn	 conns[MAXCONN];
	struct pollfd		 pfd[1 + 2 * MAXCONN];
	struct sockaddr_in	 sa, to;
	struct sigaction	 act;
	socklen_t		 salen;
	unsigned long long	 total = 0;
	char			 portfile[4096];
	long			 lport, tport;
	int			 ls, fd, up, i, k, n, one = 1;
	FILE			*f;

	(void)argc;
	lport = strtol(argv[2], NULL, 10);
	tport = strtol(argv[3], NULL, 10);
	if (lport < 0 || lport > 65535 || tport < 1 || tport > 65535) {
		fprintf(stderr, "bcount: invalid port\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	memset(&act, 0, sizeof act);
	act.sa_handler = on_stop;
	sigaction(SIGTERM, &act, NULL);
	sigaction(SIGINT, &act, NULL);

	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((unsigned short)lport);
	to = sa;
	to.sin_port = htons((unsigned short)tport);
	if ((ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == -1 ||
	    bind(ls, (struct sockaddr *)&sa, sizeof sa) == -1 ||
	    listen(ls, MAXCONN) == -1) {
		fprintf(stderr, "bcount: listen on 127.0.0.1:%ld: %s\n", lport,
		    strerror(errno));
		return 1;
	}
	salen = sizeof sa;
	if (getsockname(ls, (struct sockaddr *)&sa, &salen) == -1) {
		fprintf(stderr, "bcount: getsockname: %s\n", strerror(errno));
		return 1;
	}
	snprintf(portfile, sizeof portfile, "%s.port", argv[4]);
	if ((f = fopen(portfile, "w")) == NULL ||
	    fprintf(f, "%u\n", ntohs(sa.sin_port)) < 0 || fclose(f) == EOF) {
		fprintf(stderr, "bcount: %s: %s\n", portfile, strerror(errno));
		return 1;
	}

	while (!stop) {
		pfd[0].fd = ls;
		pfd[0].events = POLLIN;
		for (i = 0; i < MAXCONN; i++) {
			struct conn *c = &conns[i];

			for (k = 0; k < 2; k++) {
				struct pollfd *p = &pfd[1 + 2 * i + k];

				p->fd = c->used ? c->fd[k] : -1;
				p->events = 0;
				if (!c->used)
					continue;
				/* fd[k] reads for h[k], writes for h[1 - k]. */
				if (!c->h[k].eof && c->h[k].len == 0)
					p->events |= POLLIN;
				if (c->h[1 - k].len > 0)
					p->events |= POLLOUT;
			}
		}
		n = poll(pfd, 1 + 2 * MAXCONN, -1);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			fprintf(stderr, "bcount: poll: %s\n", strerror(errno));
			return 1;
		}
		for (i = 0; i < MAXCONN; i++) {
			struct conn *c = &conns[i];
			short r0 = pfd[1 + 2 * i].revents;
			short r1 = pfd[2 + 2 * i].revents;

			if (!c->used)
				continue;
			if (half_move(&c->h[0], r0, r1, &total) == -1 ||
			    half_move(&c->h[1], r1, r0, &total) == -1 ||
			    (c->h[0].done && c->h[1].done))
				conn_close(c);
		}
		if (!(pfd[0].revents & POLLIN))
			continue;
		if ((fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC)) == -1)
			continue;
		for (i = 0; i < MAXCONN && conns[i].used; i++)
			;
		if (i == MAXCONN ||
		    (up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1) {
			close(fd);
			continue;
		}
		if (connect(up, (struct sockaddr *)&to, sizeof to) == -1) {
			fprintf(stderr, "bcount: connect to 127.0.0.1:%ld: %s\n",
			    tport, strerror(errno));
			close(up);
			close(fd);
			continue;
		}
		/* Never block on one side while the other waits on us. */
		if (fcntl(fd, F_SETFL, O_NONBLOCK) == -1 ||
		    fcntl(up, F_SETFL, O_NONBLOCK) == -1) {
			close(up);
			close(fd);
			continue;
		}
		conns[i].used = 1;
		conns[i].fd[0] = fd;
		conns[i].fd[1] = up;
		conns[i].h[0] = (struct half){ fd, up, malloc(RBUFSZ), 0, 0, 0, 0 };
		conns[i].h[1] = (struct half){ up, fd, malloc(RBUFSZ), 0, 0, 0, 0 };
		if (conns[i].h[0].buf == NULL || conns[i].h[1].buf == NULL) {
			fprintf(stderr, "bcount: out of memory\n");
			return 1;
		}
	}
	if (put_count(argv[4], total) == -1) {
		fprintf(stderr, "bcount: %s: %s\n", argv[4], strerror(errno));
		return 1;
	}
	return 0;
}
