/*
 * ssh.c: an SSH client connection with one exec channel, over libssh2.
 *
 * The session runs non-blocking.  Packets go out through sock_send(),
 * which returns only once the whole packet is sent, so libssh2 never
 * holds a half-sent packet and reads and writes may follow one another
 * in any order; reads that would block wait in wait_io().  Each read and
 * write first drains what the remote command wrote on its stderr into a
 * small buffer, so that stderr can never fill the channel's window and
 * stall stdout.
 *
 * Every channel read asks libssh2 for SSH_RBUF bytes, stdout and stderr
 * alike.  libssh2 1.10 sizes the window adjustment that a read sends by
 * the length it asks for.  When that send has to wait (a key exchange is
 * under way), the next read sends the packet already made but counts its
 * own length; a different length there leaves libssh2 with a smaller
 * window than the server's, and it drops the server's data beyond it
 * without a word.
 */
#include "config.h"

#include <sys/types.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <libssh2.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "private.h"
#include "core/util.h"
#include "transport/knownhosts.h"
#include "transport/ssh.h"

#define SSH_ERRBUF	4096		/* tail of the remote stderr kept */
#define SSH_LINEMAX	512		/* longest stderr line reported */
#define SSH_RBUF	(64 * 1024)	/* bytes asked of every channel read */
#define SSH_WINDOW	(8u << 20)	/* receive window of the channel */
#define SSH_CLOSE_MS	2000		/* longest wait for a clean close */
#define SSH_TRIED	768		/* "tried: ..." of a failed login */
#define SOCK_EOF	(-1)		/* sockerr: the peer closed */

struct gck_ssh {
	struct gck_ctx		*ctx;		/* of the call in progress */
	LIBSSH2_SESSION		*sess;
	LIBSSH2_CHANNEL		*chan;
	int			 fd;
	unsigned int		 timeout_ms;
	int			 sockerr;	/* errno, or SOCK_EOF */
	int			 timedout;	/* a send made no progress */
	int			 intr;		/* a send was interrupted */
	int			 eof;		/* stdout ended */
	int			 closed;	/* by the remote */
	int			 dead;		/* why it is unusable */
	char			 deadmsg[GCK_ERRMAX / 2];
	int			 rsa_sha1;	/* RSA signs with SHA-1 only */
	char			 bye[128];	/* the server's last words */
	char			 name[320];	/* user@host[:port] */
	char			*rbuf;		/* stdout read ahead */
	size_t			 rpos, rlen;
	char			*ebuf;		/* stderr, to drain */
	char			 err[SSH_ERRBUF];	/* tail of the stderr */
	size_t			 errlen;
	char			 errline[SSH_LINEMAX];
};

/* What gck_ssh_connect() works out on its way. */
struct dial {
	const struct gck_ssh_opts	*o;
	int				 port;
	struct passwd			 pw, *pwp;
	const char			*user, *home;
	char				 pwbuf[4096];
	char				 khpath[PATH_MAX];
	char				 khname[300], khplain[300];
	struct gck_known		*k;
};

/* Host key algorithms, by the key type known_hosts names them with. */
static const struct {
	int		 kbit;
	const char	*algs;
} hktypes[] = {
	{ LIBSSH2_KNOWNHOST_KEY_ED25519,	"ssh-ed25519" },
	{ LIBSSH2_KNOWNHOST_KEY_ECDSA_256,	"ecdsa-sha2-nistp256" },
	{ LIBSSH2_KNOWNHOST_KEY_ECDSA_384,	"ecdsa-sha2-nistp384" },
	{ LIBSSH2_KNOWNHOST_KEY_ECDSA_521,	"ecdsa-sha2-nistp521" },
	{ LIBSSH2_KNOWNHOST_KEY_SSHRSA,	"rsa-sha2-512,rsa-sha2-256,ssh-rsa" },
	{ LIBSSH2_KNOWNHOST_KEY_SSHDSS,	"ssh-dss" },
};

static const char b64chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static pthread_once_t	 ssh_once = PTHREAD_ONCE_INIT;
static int		 ssh_init_rc;

static void	ssh_init(void);
static int	ssh_error(struct gck_ssh *, int, const char *, ...)
		    __attribute__((__format__(__printf__, 3, 4)));
static int	ssh_fail(struct gck_ssh *, int, const char *);
static int	timed_out(struct gck_ssh *);
static int	usable(struct gck_ssh *, int);
static int64_t	deadline(const struct gck_ssh *);
static int	wait_io(struct gck_ssh *, int64_t);
static int	drain_stderr(struct gck_ssh *, int64_t *);
static void	keep_stderr(struct gck_ssh *, const char *, size_t);
static int	remote_closed(struct gck_ssh *);
static void	printable(char *, const char *, size_t);
static LIBSSH2_SEND_FUNC(sock_send);
static LIBSSH2_RECV_FUNC(sock_recv);
static LIBSSH2_DISCONNECT_FUNC(sock_bye);
static int	tcp_connect(struct gck_ssh *, const char *, int);
static int	known_check(struct gck_ssh *, struct gck_known *, const char *,
		    const struct gck_hostkey *);
static int	hostkey_prefs(struct gck_ssh *, struct gck_known *,
		    const char *);
static int	hostkey_verify(struct gck_ssh *, const struct gck_ssh_opts *,
		    const char *, const char *, struct gck_known *,
		    const char *);
static int	connect_names(struct gck_ssh *, struct dial *);
static int	connect_session(struct gck_ssh *, struct dial *);
static int	connect_login(struct gck_ssh *, struct dial *);
static int	authenticate(struct gck_ssh *, const struct gck_ssh_opts *,
		    const char *, const char *);
static int	auth_agent(struct gck_ssh *, const char *, const char *,
		    int *, char *);
static int	auth_file(struct gck_ssh *, const char *, const char *, int,
		    int *, char *);
static int	auth_fatal(struct gck_ssh *, int);
static void	tried_add(char *, const char *, ...)
		    __attribute__((__format__(__printf__, 2, 3)));
static int	key_probe(const char *, int *);
static const unsigned char *ssh_string(const unsigned char **, size_t *,
		    size_t *);
static char	*b64_encode(const unsigned char *, size_t, int);
static size_t	b64_decode(const char *, unsigned char *, size_t);
static int	signum(const char *);

static void
ssh_init(void)
{
	ssh_init_rc = libssh2_init(0);
}

/*
 * Records "ssh NAME: " and the message on the context of the call in
 * progress, if there is one, as coming from the SSH connection; with
 * GCK_ESYS, errno as well.  Returns code.
 */
static int
ssh_error(struct gck_ssh *s, int code, const char *fmt, ...)
{
	char	msg[GCK_ERRMAX];
	va_list	ap;
	int	oerrno = errno;

	if (s->ctx == NULL)
		return code;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (code == GCK_ESYS)
		gck_set_syserr(s->ctx, oerrno, "ssh %s: %s", s->name, msg);
	else
		gck_set_error(s->ctx, code, "ssh %s: %s", s->name, msg);
	return gck_error_from(s->ctx, GCK_FROM_SSH);
}

/*
 * Sets the error of a libssh2 call that failed with rc while doing what:
 * an interrupt, a timeout, the socket's own failure, the server's reason
 * to disconnect, or what libssh2 says, in that order.  The connection is
 * unusable from then on.  Returns the code.
 */
static int
ssh_fail(struct gck_ssh *s, int rc, const char *what)
{
	char	*lmsg = NULL;
	int	 code = GCK_ESSH, sig;

	if (s->intr) {
		sig = s->ctx != NULL ? gck_interrupted(s->ctx) : 0;
		code = GCK_EINTR;
		snprintf(s->deadmsg, sizeof s->deadmsg, "interrupted by %s",
		    gck_signame(sig));
		s->dead = code;
		return s->ctx != NULL ? gck_set_error(s->ctx, code, "%s",
		    s->deadmsg) : code;
	}
	if (s->timedout || rc == LIBSSH2_ERROR_TIMEOUT ||
	    rc == LIBSSH2_ERROR_SOCKET_TIMEOUT)
		return timed_out(s);
	if (s->bye[0] != '\0')
		snprintf(s->deadmsg, sizeof s->deadmsg,
		    "%s: the server disconnected: %s", what, s->bye);
	else if (s->sockerr == SOCK_EOF)
		snprintf(s->deadmsg, sizeof s->deadmsg,
		    "%s: connection closed by the remote host", what);
	else if (s->sockerr != 0)
		snprintf(s->deadmsg, sizeof s->deadmsg, "%s: %s", what,
		    strerror(s->sockerr));
	else {
		libssh2_session_last_error(s->sess, &lmsg, NULL, 0);
		snprintf(s->deadmsg, sizeof s->deadmsg, "%s: %s", what,
		    lmsg != NULL && *lmsg != '\0' ? lmsg : "unknown error");
	}
	s->dead = code;
	return ssh_error(s, code, "%s", s->deadmsg);
}

static int
timed_out(struct gck_ssh *s)
{
	if (s->timeout_ms % 1000 == 0)
		snprintf(s->deadmsg, sizeof s->deadmsg, "no answer for %u s",
		    s->timeout_ms / 1000);
	else
		snprintf(s->deadmsg, sizeof s->deadmsg, "no answer for %.1f s",
		    s->timeout_ms / 1000.0);
	s->dead = GCK_ETIMEDOUT;
	return ssh_error(s, GCK_ETIMEDOUT, "%s", s->deadmsg);
}

/* Fails with the reason the connection died, if it did. */
static int
usable(struct gck_ssh *s, int need_channel)
{
	if (s->dead != 0)
		return ssh_error(s, s->dead, "%s", s->deadmsg);
	if (need_channel && s->chan == NULL)
		return ssh_error(s, GCK_EINVAL, "no command is running");
	return GCK_OK;
}

/* When a wait that starts now times out; -1: never. */
static int64_t
deadline(const struct gck_ssh *s)
{
	return s->timeout_ms == 0 ? -1 : gck_now_ms() + s->timeout_ms;
}

/*
 * Waits until the socket is ready for what libssh2 last blocked on, or
 * until the deadline.  Returns GCK_OK or a code.
 */
static int
wait_io(struct gck_ssh *s, int64_t dl)
{
	struct pollfd	pfd;
	int64_t		left;
	int		dir, n;

	dir = libssh2_session_block_directions(s->sess);
	pfd.fd = s->fd;
	pfd.events = 0;
	if (dir & LIBSSH2_SESSION_BLOCK_INBOUND)
		pfd.events |= POLLIN;
	if (dir & LIBSSH2_SESSION_BLOCK_OUTBOUND)
		pfd.events |= POLLOUT;
	if (pfd.events == 0)
		pfd.events = POLLIN;
	for (;;) {
		if (s->ctx != NULL && gck_check_interrupt(s->ctx) != GCK_OK)
			return GCK_EINTR;
		left = -1;
		if (dl != -1 && (left = dl - gck_now_ms()) <= 0)
			return timed_out(s);
		n = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (n > 0)
			return GCK_OK;
		if (n == -1 && errno != EINTR)
			return ssh_error(s, GCK_ESYS, "poll: %s",
			    strerror(errno));
	}
}

/*
 * Moves what the remote command wrote on its stderr out of the channel
 * into s->err, and pushes the deadline *dl back when there was some.
 */
static int
drain_stderr(struct gck_ssh *s, int64_t *dl)
{
	ssize_t	n;

	for (;;) {
		n = libssh2_channel_read_stderr(s->chan, s->ebuf, SSH_RBUF);
		if (n > 0) {
			keep_stderr(s, s->ebuf, (size_t)n);
			*dl = deadline(s);
			continue;
		}
		if (n == 0 || n == LIBSSH2_ERROR_EAGAIN)
			return GCK_OK;
		return ssh_fail(s, (int)n, "connection lost");
	}
}

/* Appends to the stderr tail and finds its last non-empty line again. */
static void
keep_stderr(struct gck_ssh *s, const char *p, size_t n)
{
	size_t	drop, start, end;

	if (n >= sizeof s->err) {
		p += n - sizeof s->err;
		n = sizeof s->err;
		s->errlen = 0;
	}
	if (s->errlen + n > sizeof s->err) {
		drop = s->errlen + n - sizeof s->err;
		memmove(s->err, s->err + drop, s->errlen - drop);
		s->errlen -= drop;
	}
	memcpy(s->err + s->errlen, p, n);
	s->errlen += n;

	end = s->errlen;
	while (end > 0 && (s->err[end - 1] == '\n' || s->err[end - 1] == '\r' ||
	    s->err[end - 1] == ' ' || s->err[end - 1] == '\t'))
		end--;
	if (end == 0)
		return;
	start = end;
	while (start > 0 && s->err[start - 1] != '\n')
		start--;
	if (end - start >= sizeof s->errline)
		end = start + sizeof s->errline - 1;
	printable(s->errline, s->err + start, end - start);
}

/* Copies n bytes of remote text to dst, control characters as '?'. */
static void
printable(char *dst, const char *src, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		unsigned char	c = (unsigned char)src[i];

		dst[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	dst[n] = '\0';
}

/*
 * Returns 1 when the remote side has closed the channel, 0 when not, or
 * a code when the connection failed.
 */
static int
remote_closed(struct gck_ssh *s)
{
	int	rc;

	if (s->closed)
		return 1;
	rc = libssh2_channel_wait_closed(s->chan);
	if (rc == 0) {
		s->closed = 1;
		return 1;
	}
	if (rc == LIBSSH2_ERROR_EAGAIN || rc == LIBSSH2_ERROR_INVAL)
		return 0;	/* open, or no EOF from the remote yet */
	return ssh_fail(s, rc, "connection lost");
}

/*
 * libssh2's send: sends all of the packet before it returns, waiting up
 * to the timeout each time the socket is full.
 */
static
LIBSSH2_SEND_FUNC(sock_send)
{
	struct gck_ssh	*s = *abstract;
	const char	*p = buffer;
	struct pollfd	 pfd;
	size_t		 done = 0;
	ssize_t		 n;
	int		 k;

	while (done < length) {
		n = send(socket, p + done, length - done, flags | MSG_NOSIGNAL);
		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n == -1 && errno != EAGAIN && errno != EWOULDBLOCK &&
		    errno != EINTR) {
			s->sockerr = errno;
			return -errno;
		}
		pfd.fd = socket;
		pfd.events = POLLOUT;
		k = poll(&pfd, 1, s->timeout_ms == 0 ||
		    s->timeout_ms > INT_MAX ? -1 : (int)s->timeout_ms);
		if (k == 0) {
			s->timedout = 1;
			return -ETIMEDOUT;
		}
		if (k == -1 && errno == EINTR && s->ctx != NULL &&
		    gck_interrupted(s->ctx)) {
			s->intr = 1;
			return -EINTR;
		}
	}
	return (ssize_t)done;
}

static
LIBSSH2_RECV_FUNC(sock_recv)
{
	struct gck_ssh	*s = *abstract;
	ssize_t		 n;

	do
		n = recv(socket, buffer, length, flags);
	while (n == -1 && errno == EINTR);
	if (n == -1) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return -EAGAIN;
		s->sockerr = errno;
		return -errno;
	}
	if (n == 0)
		s->sockerr = SOCK_EOF;
	return n;
}

static
LIBSSH2_DISCONNECT_FUNC(sock_bye)
{
	struct gck_ssh	*s = *abstract;
	size_t		 n;

	n = message_len > 0 ? (size_t)message_len : 0;
	if (n >= sizeof s->bye)
		n = sizeof s->bye - 1;
	if (message == NULL || n == 0)
		snprintf(s->bye, sizeof s->bye, "reason %d", reason);
	else
		printable(s->bye, message, n);
}

/*
 * Connects to host:port, each of its addresses in turn, each within the
 * timeout.  Sets s->fd.  Returns GCK_OK or a code.
 */
static int
tcp_connect(struct gck_ssh *s, const char *host, int port)
{
	struct addrinfo	 hints, *res = NULL, *ai;
	struct pollfd	 pfd;
	socklen_t	 sl;
	int64_t		 dl, left;
	char		 serv[16];
	int		 fd = -1, e, err = 0, n, one = 1, r;

	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(serv, sizeof serv, "%d", port);
	if ((e = getaddrinfo(host, serv, &hints, &res)) != 0) {
		r = ssh_error(s, GCK_ESSH, "cannot resolve '%s': %s", host,
		    e == EAI_SYSTEM ? strerror(errno) : gai_strerror(e));
		goto out;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, ai->ai_protocol);
		if (fd == -1) {
			err = errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		err = errno;
		if (err == EINPROGRESS) {
			dl = deadline(s);
			pfd.fd = fd;
			pfd.events = POLLOUT;
			for (;;) {
				if (gck_check_interrupt(s->ctx) != GCK_OK) {
					r = GCK_EINTR;
					goto out;
				}
				left = -1;
				if (dl != -1 && (left = dl - gck_now_ms()) < 0)
					left = 0;
				n = poll(&pfd, 1, left > INT_MAX ? INT_MAX :
				    (int)left);
				if (n != -1 || errno != EINTR)
					break;
			}
			if (n == 0)
				err = ETIMEDOUT;
			else {
				sl = sizeof err;
				if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err,
				    &sl) == -1)
					err = errno;
				if (err == 0)
					break;
			}
		}
		close(fd);
		fd = -1;
	}
	if (fd == -1) {
		if (err == ETIMEDOUT && s->timeout_ms != 0)
			r = ssh_error(s, GCK_ETIMEDOUT,
			    "cannot connect: no answer for %.*f s",
			    s->timeout_ms % 1000 ? 1 : 0,
			    s->timeout_ms / 1000.0);
		else
			r = ssh_error(s, GCK_ESSH, "cannot connect: %s",
			    strerror(err));
		goto out;
	}
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	s->fd = fd;
	fd = -1;
	r = GCK_OK;
out:
	if (fd != -1)
		close(fd);
	if (res != NULL)
		freeaddrinfo(res);
	return r;
}

/*
 * Looks the host key up under name ("host", or "[host]:port" off port
 * 22, as ssh writes them).  Returns a GCK_KNOWN_* or a code.
 */
static int
known_check(struct gck_ssh *s, struct gck_known *k, const char *name,
    const struct gck_hostkey *hk)
{
	int	r;

	if ((r = gck_known_check(k, name, hk)) == GCK_KNOWN_FAILED)
		return ssh_fail(s, LIBSSH2_KNOWNHOST_CHECK_FAILURE,
		    "cannot check the host key");
	return r;
}

/*
 * Has the server offer first the host key types that known_hosts holds
 * for name, as ssh does, then the others.
 */
static int
hostkey_prefs(struct gck_ssh *s, struct gck_known *k, const char *name)
{
	const char	**algs = NULL;
	char		  pref[512] = "", one[64];
	const char	 *p;
	size_t		  i, j, len, n;
	int		  nalgs, pass, rc, r;

	if ((nalgs = libssh2_session_supported_algs(s->sess,
	    LIBSSH2_METHOD_HOSTKEY, &algs)) < 0) {
		algs = NULL;
		r = ssh_fail(s, nalgs, "cannot list host key algorithms");
		goto out;
	}
	/* libssh2 signs with rsa-sha2 where it verifies host keys so */
	s->rsa_sha1 = 1;
	for (j = 0; j < (size_t)nalgs; j++)
		if (strcmp(algs[j], "rsa-sha2-256") == 0)
			s->rsa_sha1 = 0;
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < sizeof hktypes / sizeof hktypes[0]; i++) {
			if (gck_known_has_type(k, name, hktypes[i].kbit) !=
			    (pass == 0))
				continue;
			for (p = hktypes[i].algs; *p != '\0'; p += len) {
				p += *p == ',';
				len = strcspn(p, ",");
				if (len >= sizeof one)
					continue;
				memcpy(one, p, len);
				one[len] = '\0';
				for (j = 0; j < (size_t)nalgs; j++)
					if (strcmp(algs[j], one) == 0)
						break;
				if (j == (size_t)nalgs)
					continue;
				n = strlen(pref);
				snprintf(pref + n, sizeof pref - n, "%s%s",
				    n > 0 ? "," : "", one);
			}
		}
	}
	if (pref[0] != '\0' && (rc = libssh2_session_method_pref(s->sess,
	    LIBSSH2_METHOD_HOSTKEY, pref)) != 0) {
		r = ssh_fail(s, rc, "cannot set host key algorithms");
		goto out;
	}
	r = GCK_OK;
out:
	if (algs != NULL)
		libssh2_free(s->sess, algs);
	return r;
}

/*
 * Checks the server's host key against known_hosts: a match goes on, an
 * unknown host is refused unless accept_new adds it, and a changed or
 * revoked key is always refused.
 */
static int
hostkey_verify(struct gck_ssh *s, const struct gck_ssh_opts *o,
    const char *name, const char *plain, struct gck_known *k,
    const char *path)
{
	struct gck_hostkey	 hk;
	const unsigned char	*q, *t;
	const char		*h;
	char			*fp = NULL;
	size_t			 n, tlen;
	int			 type, r;

	memset(&hk, 0, sizeof hk);
	if ((h = libssh2_session_hostkey(s->sess, &hk.len, &type)) == NULL) {
		r = ssh_fail(s, libssh2_session_last_errno(s->sess),
		    "no host key");
		goto out;
	}
	hk.blob = (const unsigned char *)h;
	switch (type) {
	case LIBSSH2_HOSTKEY_TYPE_RSA:
		hk.kbit = LIBSSH2_KNOWNHOST_KEY_SSHRSA;
		break;
	case LIBSSH2_HOSTKEY_TYPE_DSS:
		hk.kbit = LIBSSH2_KNOWNHOST_KEY_SSHDSS;
		break;
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_256:
		hk.kbit = LIBSSH2_KNOWNHOST_KEY_ECDSA_256;
		break;
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_384:
		hk.kbit = LIBSSH2_KNOWNHOST_KEY_ECDSA_384;
		break;
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_521:
		hk.kbit = LIBSSH2_KNOWNHOST_KEY_ECDSA_521;
		break;
	case LIBSSH2_HOSTKEY_TYPE_ED25519:
		hk.kbit = LIBSSH2_KNOWNHOST_KEY_ED25519;
		break;
	default:
		r = ssh_error(s, GCK_ESSH, "host key of unknown type %d", type);
		goto out;
	}
	/* The blob starts with the type's name, as a string. */
	q = hk.blob;
	n = hk.len;
	if ((t = ssh_string(&q, &n, &tlen)) == NULL || tlen == 0 ||
	    tlen >= sizeof hk.type) {
		r = ssh_error(s, GCK_ESSH, "malformed host key");
		goto out;
	}
	printable(hk.type, (const char *)t, tlen);
	if ((h = libssh2_hostkey_hash(s->sess,
	    LIBSSH2_HOSTKEY_HASH_SHA256)) == NULL) {
		r = ssh_fail(s, libssh2_session_last_errno(s->sess),
		    "cannot hash the host key");
		goto out;
	}
	if ((fp = b64_encode((const unsigned char *)h, 32, 0)) == NULL ||
	    (hk.b64 = b64_encode(hk.blob, hk.len, 1)) == NULL) {
		r = ssh_error(s, GCK_ENOMEM, "out of memory");
		goto out;
	}
	snprintf(hk.fp, sizeof hk.fp, "SHA256:%s", fp);

	/*
	 * As ssh does, a host unknown as "[host]:port" may be known by its
	 * plain name: a matching key there is taken, any other not.
	 */
	if ((r = known_check(s, k, name, &hk)) == GCK_KNOWN_NOTFOUND &&
	    plain != NULL && known_check(s, k, plain, &hk) == GCK_KNOWN_MATCH)
		r = GCK_KNOWN_MATCH;
	if (r == GCK_KNOWN_NOTFOUND && o->accept_new &&
	    (r = gck_known_add(s->ctx, s->sess, s->name, path,
	    o->known_hosts == NULL, name, &hk)) == GCK_KNOWN_FAILED)
		r = ssh_fail(s, LIBSSH2_KNOWNHOST_CHECK_FAILURE,
		    "cannot check the host key");
	switch (r) {
	case GCK_KNOWN_MATCH:
		r = GCK_OK;
		break;
	case GCK_KNOWN_NOTFOUND:
		r = ssh_error(s, GCK_ESSH, "host key not known (%s %s); "
		    "add it to %s or use --accept-new", hk.type, hk.fp, path);
		break;
	case GCK_KNOWN_CHANGED:
		r = ssh_error(s, GCK_ESSH, "host key has CHANGED (%s %s), "
		    "known_hosts says otherwise: refusing to connect "
		    "(someone may be intercepting, or the host was "
		    "reinstalled; remove the old key with ssh-keygen -R)",
		    hk.type, hk.fp);
		break;
	case GCK_KNOWN_REVOKED:
		r = ssh_error(s, GCK_ESSH, "host key is REVOKED (%s %s) in %s: "
		    "refusing to connect", hk.type, hk.fp, path);
		break;
	}
out:
	free(fp);
	free(hk.b64);
	return r;
}

/*
 * Logs in as user: with the agent's keys, then with the identity file,
 * or the usual key files in home/.ssh when there is none.  Never asks
 * for a passphrase or a password.
 */
static int
authenticate(struct gck_ssh *s, const struct gck_ssh_opts *o,
    const char *user, const char *home)
{
	static const char *const defkeys[] = {
		"id_ed25519", "id_ecdsa", "id_rsa"
	};
	const char	*sock, *m;
	char		*methods, tried[SSH_TRIED] = "", path[PATH_MAX];
	size_t		 i, len;
	int64_t		 dl;
	int		 ok = 0, pk = 0, rc, r;

	dl = deadline(s);
	while ((methods = libssh2_userauth_list(s->sess, user,
	    (unsigned int)strlen(user))) == NULL) {
		if (libssh2_userauth_authenticated(s->sess))
			return GCK_OK;
		rc = libssh2_session_last_errno(s->sess);
		if (rc != LIBSSH2_ERROR_EAGAIN)
			return ssh_fail(s, rc, "authentication failed");
		if ((r = wait_io(s, dl)) != GCK_OK)
			return r;
	}
	for (m = methods; *m != '\0'; m += len) {
		m += *m == ',';
		len = strcspn(m, ",");
		if (len == 9 && strncmp(m, "publickey", 9) == 0)
			pk = 1;
	}
	if (!pk) {
		char	meth[128];

		printable(meth, methods, strlen(methods) < sizeof meth ?
		    strlen(methods) : sizeof meth - 1);
		return ssh_error(s, GCK_ESSH, "authentication failed: the "
		    "server takes no public key (only %s)", meth);
	}

	sock = o->agent != NULL ? o->agent : getenv("SSH_AUTH_SOCK");
	if (sock != NULL && *sock != '\0' && strcmp(sock, "none") != 0) {
		if ((r = auth_agent(s, user, sock, &ok, tried)) != GCK_OK)
			return r;
		if (ok)
			return GCK_OK;
	}
	if (o->identity != NULL) {
		if ((r = auth_file(s, user, o->identity, 1, &ok, tried)) !=
		    GCK_OK)
			return r;
		if (ok)
			return GCK_OK;
	} else if (home != NULL) {
		for (i = 0; i < sizeof defkeys / sizeof defkeys[0]; i++) {
			snprintf(path, sizeof path, "%s/.ssh/%s", home,
			    defkeys[i]);
			if ((r = auth_file(s, user, path, 0, &ok, tried)) !=
			    GCK_OK)
				return r;
			if (ok)
				return GCK_OK;
		}
	}
	if (tried[0] == '\0')
		return ssh_error(s, GCK_ESSH, "authentication failed (no "
		    "ssh-agent and no key file to try)");
	return ssh_error(s, GCK_ESSH, "authentication failed (tried: %s)",
	    tried);
}

/*
 * Tries each key the agent at sock holds.  Sets *ok on success; an
 * agent that cannot be used is noted in tried, not an error.
 */
static int
auth_agent(struct gck_ssh *s, const char *user, const char *sock, int *ok,
    char *tried)
{
	LIBSSH2_AGENT			*agent = NULL;
	struct libssh2_agent_publickey	*id, *prev = NULL;
	const unsigned char		*q, *t;
	size_t				 left, tlen;
	int64_t				 dl;
	int				 n = 0, nrsa = 0, rc, r;

	if ((agent = libssh2_agent_init(s->sess)) == NULL) {
		r = ssh_error(s, GCK_ENOMEM, "out of memory");
		goto out;
	}
	libssh2_agent_set_identity_path(agent, sock);
	if (libssh2_agent_connect(agent) != 0) {
		tried_add(tried, "ssh-agent (cannot connect to %s)", sock);
		r = GCK_OK;
		goto out;
	}
	if (libssh2_agent_list_identities(agent) != 0) {
		tried_add(tried, "ssh-agent (cannot list its keys)");
		r = GCK_OK;
		goto out;
	}
	while ((rc = libssh2_agent_get_identity(agent, &id, prev)) == 0) {
		n++;
		q = id->blob;
		left = id->blob_len;
		if ((t = ssh_string(&q, &left, &tlen)) != NULL && tlen == 7 &&
		    memcmp(t, "ssh-rsa", 7) == 0)
			nrsa++;
		dl = deadline(s);
		while ((rc = libssh2_agent_userauth(agent, user, id)) ==
		    LIBSSH2_ERROR_EAGAIN)
			if ((r = wait_io(s, dl)) != GCK_OK)
				goto out;
		if (rc == 0) {
			*ok = 1;
			r = GCK_OK;
			goto out;
		}
		if (auth_fatal(s, rc)) {
			r = ssh_fail(s, rc, "authentication failed");
			goto out;
		}
		prev = id;
	}
	if (n == 0)
		tried_add(tried, "ssh-agent (no keys)");
	else if (nrsa > 0 && s->rsa_sha1)
		tried_add(tried, "ssh-agent (%d key%s, %d RSA: this libssh2 "
		    "signs with SHA-1 only)", n, n == 1 ? "" : "s", nrsa);
	else
		tried_add(tried, "ssh-agent (%d key%s)", n, n == 1 ? "" : "s");
	r = GCK_OK;
out:
	if (agent != NULL) {
		libssh2_agent_disconnect(agent);
		libssh2_agent_free(agent);
	}
	return r;
}

/*
 * Tries the private key file at path; libssh2 derives the public key.
 * A file that is encrypted, or (unless given) missing, is skipped.
 */
static int
auth_file(struct gck_ssh *s, const char *user, const char *path, int given,
    int *ok, char *tried)
{
	char	*lmsg = NULL;
	int64_t	 dl;
	int	 enc, rsa, rc, r;

	if ((enc = key_probe(path, &rsa)) == -1) {
		if (given || errno != ENOENT)
			tried_add(tried, "%s (%s)", path, strerror(errno));
		return GCK_OK;
	}
	if (enc) {
		tried_add(tried, "%s (encrypted, skipped)", path);
		return GCK_OK;
	}
	dl = deadline(s);
	/* "", not NULL: with NULL, OpenSSL would prompt on the terminal. */
	while ((rc = libssh2_userauth_publickey_fromfile_ex(s->sess, user,
	    (unsigned int)strlen(user), NULL, path, "")) ==
	    LIBSSH2_ERROR_EAGAIN)
		if ((r = wait_io(s, dl)) != GCK_OK)
			return r;
	if (rc == 0) {
		*ok = 1;
		return GCK_OK;
	}
	if (auth_fatal(s, rc))
		return ssh_fail(s, rc, "authentication failed");
	if (rc == LIBSSH2_ERROR_FILE) {
		libssh2_session_last_error(s->sess, &lmsg, NULL, 0);
		tried_add(tried, "%s (unusable: %s)", path,
		    lmsg != NULL ? lmsg : "unknown error");
	} else if (rsa && s->rsa_sha1)
		tried_add(tried, "%s (RSA: this libssh2 signs with SHA-1 only)",
		    path);
	else
		tried_add(tried, "%s", path);
	return GCK_OK;
}

/* Whether a failed login attempt means the connection is gone. */
static int
auth_fatal(struct gck_ssh *s, int rc)
{
	switch (rc) {
	case LIBSSH2_ERROR_SOCKET_SEND:
	case LIBSSH2_ERROR_SOCKET_RECV:
	case LIBSSH2_ERROR_SOCKET_DISCONNECT:
	case LIBSSH2_ERROR_SOCKET_TIMEOUT:
	case LIBSSH2_ERROR_TIMEOUT:
		return 1;
	default:
		return s->sockerr != 0 || s->timedout || s->intr ||
		    s->bye[0] != '\0';
	}
}

static void
tried_add(char *tried, const char *fmt, ...)
{
	va_list	ap;
	size_t	n = strlen(tried);

	if (n > 0 && n + 2 < SSH_TRIED) {
		memcpy(tried + n, ", ", 3);
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(tried + n, SSH_TRIED - n, fmt, ap);
	va_end(ap);
}

/*
 * Looks into the private key file at path, and sets *rsa when it holds
 * an RSA key.  Returns 1 if it is encrypted, 0 if not (or of a form not
 * known here), -1 with errno if it cannot be read.
 */
static int
key_probe(const char *path, int *rsa)
{
	static const char		begin[] =
	    "-----BEGIN OPENSSH PRIVATE KEY-----";
	static const char		magic[] = "openssh-key-v1";
	/* rsaEncryption, 1.2.840.113549.1.1.1 */
	static const unsigned char	rsaoid[] = {
		0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01
	};
	const unsigned char		*q, *c, *pk;
	unsigned char			 bin[512];
	char				 buf[8192], *p;
	size_t				 got = 0, n, len, pklen;
	ssize_t				 k;
	int				 fd, e, enc;

	*rsa = 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	while (got < sizeof buf - 1 &&
	    (k = read(fd, buf + got, sizeof buf - 1 - got)) != 0) {
		if (k == -1) {
			if (errno == EINTR)
				continue;
			e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		got += (size_t)k;
	}
	close(fd);
	buf[got] = '\0';
	*rsa = strstr(buf, "-----BEGIN RSA PRIVATE KEY-----") != NULL;
	if (strstr(buf, "-----BEGIN ENCRYPTED PRIVATE KEY-----") != NULL ||
	    strstr(buf, "Proc-Type: 4,ENCRYPTED") != NULL)
		return 1;
	if ((p = strstr(buf, "-----BEGIN PRIVATE KEY-----")) != NULL) {
		/* PKCS#8: the algorithm's OID comes first */
		n = b64_decode(p + sizeof "-----BEGIN PRIVATE KEY-----" - 1,
		    bin, 32);
		*rsa = memmem(bin, n, rsaoid, sizeof rsaoid) != NULL;
		return 0;
	}
	if ((p = strstr(buf, begin)) == NULL)
		return 0;
	/*
	 * magic, cipher name, KDF name, KDF options, number of keys, then
	 * the public key, whose first string is its type
	 */
	n = b64_decode(p + sizeof begin - 1, bin, sizeof bin);
	if (n < sizeof magic || memcmp(bin, magic, sizeof magic) != 0)
		return 0;
	q = bin + sizeof magic;
	n -= sizeof magic;
	if ((c = ssh_string(&q, &n, &len)) == NULL)
		return 0;
	enc = len != 4 || memcmp(c, "none", 4) != 0;
	if (ssh_string(&q, &n, &len) != NULL &&
	    ssh_string(&q, &n, &len) != NULL && n >= 4) {
		q += 4;
		n -= 4;
		if ((pk = ssh_string(&q, &n, &pklen)) != NULL &&
		    (c = ssh_string(&pk, &pklen, &len)) != NULL && len == 7 &&
		    memcmp(c, "ssh-rsa", 7) == 0)
			*rsa = 1;
	}
	return enc;
}

/*
 * Takes the SSH string (a 32-bit length, then the bytes) at *p, *n bytes
 * left.  Returns its bytes and sets *len, or returns NULL if it does not
 * fit.
 */
static const unsigned char *
ssh_string(const unsigned char **p, size_t *n, size_t *len)
{
	const unsigned char	*s = *p;

	if (*n < 4)
		return NULL;
	*len = (size_t)s[0] << 24 | (size_t)s[1] << 16 | (size_t)s[2] << 8 |
	    s[3];
	if (*len > *n - 4)
		return NULL;
	*p += 4 + *len;
	*n -= 4 + *len;
	return s + 4;
}

/* Base64 of n bytes, with '=' padding when pad; NULL when out of memory. */
static char *
b64_encode(const unsigned char *p, size_t n, int pad)
{
	char		*out, *o;
	size_t		 i;
	uint32_t	 v;

	if ((out = malloc((n + 2) / 3 * 4 + 1)) == NULL)
		return NULL;
	o = out;
	for (i = 0; i + 2 < n; i += 3) {
		v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		*o++ = b64chars[v >> 18];
		*o++ = b64chars[v >> 12 & 63];
		*o++ = b64chars[v >> 6 & 63];
		*o++ = b64chars[v & 63];
	}
	if (i < n) {
		v = (uint32_t)p[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		*o++ = b64chars[v >> 18];
		*o++ = b64chars[v >> 12 & 63];
		if (i + 1 < n)
			*o++ = b64chars[v >> 6 & 63];
		else if (pad)
			*o++ = '=';
		if (pad)
			*o++ = '=';
	}
	*o = '\0';
	return out;
}

/*
 * Decodes base64 text, skipping white space, up to its end (or any other
 * character) or until max bytes are out.  Returns the count.
 */
static size_t
b64_decode(const char *s, unsigned char *out, size_t max)
{
	const char	*c;
	uint32_t	 v = 0;
	size_t		 n = 0;
	int		 bits = 0;

	for (; *s != '\0' && n < max; s++) {
		if (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
			continue;
		if ((c = strchr(b64chars, *s)) == NULL)
			break;
		v = v << 6 | (uint32_t)(c - b64chars);
		if ((bits += 6) >= 8) {
			bits -= 8;
			out[n++] = (unsigned char)(v >> bits);
		}
	}
	return n;
}

/* The number of a signal by its SSH name ("TERM"), 0 if not known. */
static int
signum(const char *name)
{
	static const struct {
		const char	*name;
		int		 sig;
	} sigs[] = {
		{ "ABRT", SIGABRT }, { "ALRM", SIGALRM }, { "FPE", SIGFPE },
		{ "HUP", SIGHUP }, { "ILL", SIGILL }, { "INT", SIGINT },
		{ "KILL", SIGKILL }, { "PIPE", SIGPIPE }, { "QUIT", SIGQUIT },
		{ "SEGV", SIGSEGV }, { "TERM", SIGTERM }, { "USR1", SIGUSR1 },
		{ "USR2", SIGUSR2 }, { "BUS", SIGBUS }, { "TRAP", SIGTRAP },
	};
	size_t	i;

	for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		if (strcmp(name, sigs[i].name) == 0)
			return sigs[i].sig;
	return 0;
}

/* The names of a connection and of its host in known_hosts. */
static int
connect_names(struct gck_ssh *s, struct dial *d)
{
	const struct gck_ssh_opts	*o = d->o;
	struct gck_ctx			*ctx = s->ctx;

	(void)getpwuid_r(getuid(), &d->pw, d->pwbuf, sizeof d->pwbuf,
	    &d->pwp);
	if ((d->user = o->user) == NULL && (d->user = d->pwp != NULL ?
	    d->pwp->pw_name : NULL) == NULL) {
		gck_set_error(ctx, GCK_ESSH, "ssh %s: no user name for uid %lu",
		    o->host, (unsigned long)getuid());
		return gck_error_from(ctx, GCK_FROM_SSH);
	}
	if ((d->home = getenv("HOME")) == NULL || *d->home == '\0')
		d->home = d->pwp != NULL ? d->pwp->pw_dir : NULL;
	if (d->port == 22)
		snprintf(s->name, sizeof s->name, "%s@%s", d->user, o->host);
	else if (strchr(o->host, ':') != NULL)
		snprintf(s->name, sizeof s->name, "%s@[%s]:%d", d->user,
		    o->host, d->port);
	else
		snprintf(s->name, sizeof s->name, "%s@%s:%d", d->user,
		    o->host, d->port);
	gck_known_names(o->host, d->port, d->khname, sizeof d->khname,
	    d->khplain, sizeof d->khplain);
	if (o->known_hosts != NULL)
		snprintf(d->khpath, sizeof d->khpath, "%s", o->known_hosts);
	else if (d->home != NULL)
		snprintf(d->khpath, sizeof d->khpath, "%s/.ssh/known_hosts",
		    d->home);
	else
		return ssh_error(s, GCK_ESSH, "no home directory for "
		    "known_hosts");
	return GCK_OK;
}

/* Reaches the host and starts a libssh2 session over the socket. */
static int
connect_session(struct gck_ssh *s, struct dial *d)
{
	int	r;

	pthread_once(&ssh_once, ssh_init);
	if (ssh_init_rc != 0)
		return ssh_error(s, GCK_ESSH, "cannot initialize libssh2");
	if ((r = tcp_connect(s, d->o->host, d->port)) != GCK_OK)
		return r;
	if ((s->sess = libssh2_session_init_ex(NULL, NULL, NULL, s)) ==
	    NULL)
		return ssh_error(s, GCK_ENOMEM, "out of memory");
	libssh2_session_callback_set(s->sess, LIBSSH2_CALLBACK_SEND,
	    (void *)sock_send);
	libssh2_session_callback_set(s->sess, LIBSSH2_CALLBACK_RECV,
	    (void *)sock_recv);
	libssh2_session_callback_set(s->sess, LIBSSH2_CALLBACK_DISCONNECT,
	    (void *)sock_bye);
	libssh2_session_set_blocking(s->sess, 0);
	return GCK_OK;
}

/* The handshake, the host key checked, and the login. */
static int
connect_login(struct gck_ssh *s, struct dial *d)
{
	int64_t	dl;
	int	rc, r;

	if ((r = gck_known_load(s->ctx, s->sess, s->name, d->khpath,
	    &d->k)) != GCK_OK)
		return r;
	if ((r = hostkey_prefs(s, d->k, d->khname)) != GCK_OK)
		return r;
	dl = deadline(s);
	while ((rc = libssh2_session_handshake(s->sess, s->fd)) ==
	    LIBSSH2_ERROR_EAGAIN)
		if ((r = wait_io(s, dl)) != GCK_OK)
			return r;
	if (rc != 0)
		return ssh_fail(s, rc, "handshake failed");
	if ((r = hostkey_verify(s, d->o, d->khname, d->port == 22 ? NULL :
	    d->khplain, d->k, d->khpath)) != GCK_OK)
		return r;
	return authenticate(s, d->o, d->user, d->home);
}

int
gck_ssh_connect(struct gck_ctx *ctx, const struct gck_ssh_opts *o,
    struct gck_ssh **sp)
{
	struct gck_ssh	*s = NULL;
	struct dial	 d;
	int		 r;

	*sp = NULL;
	memset(&d, 0, sizeof d);
	d.o = o;
	d.port = o->port == 0 ? 22 : o->port;
	if (o->host == NULL || *o->host == '\0' || d.port < 1 ||
	    d.port > 65535) {
		r = gck_set_error(ctx, GCK_EINVAL, "ssh: no host, or a bad "
		    "port");
		goto out;
	}
	if ((s = calloc(1, sizeof *s)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	s->ctx = ctx;
	s->fd = -1;
	s->timeout_ms = o->timeout_ms;
	if ((s->rbuf = malloc(SSH_RBUF)) == NULL ||
	    (s->ebuf = malloc(SSH_RBUF)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if ((r = connect_names(s, &d)) != GCK_OK ||
	    (r = connect_session(s, &d)) != GCK_OK ||
	    (r = connect_login(s, &d)) != GCK_OK)
		goto out;
	s->ctx = NULL;
	*sp = s;
	s = NULL;
	r = GCK_OK;
out:
	gck_known_free(d.k);
	if (s != NULL) {
		s->dead = r;	/* no goodbye: fail fast */
		gck_ssh_close(s);
	}
	return r;
}

int
gck_ssh_exec(struct gck_ctx *ctx, struct gck_ssh *s, const char *command)
{
	LIBSSH2_CHANNEL	*ch;
	int64_t		 dl;
	int		 rc, r;

	s->ctx = ctx;
	if ((r = usable(s, 0)) != GCK_OK)
		return r;
	if (s->chan != NULL)
		return ssh_error(s, GCK_EINVAL, "a command runs already");
	dl = deadline(s);
	while ((ch = libssh2_channel_open_ex(s->sess, "session",
	    sizeof "session" - 1, SSH_WINDOW, LIBSSH2_CHANNEL_PACKET_DEFAULT,
	    NULL, 0)) == NULL) {
		rc = libssh2_session_last_errno(s->sess);
		if (rc != LIBSSH2_ERROR_EAGAIN)
			return ssh_fail(s, rc, "cannot open a channel");
		if ((r = wait_io(s, dl)) != GCK_OK)
			return r;
	}
	s->chan = ch;
	while ((rc = libssh2_channel_exec(ch, command)) ==
	    LIBSSH2_ERROR_EAGAIN)
		if ((r = wait_io(s, dl)) != GCK_OK)
			return r;
	if (rc != 0)
		return ssh_fail(s, rc, "cannot run the command");
	return GCK_OK;
}

int
gck_ssh_write(struct gck_ctx *ctx, struct gck_ssh *s, const void *buf,
    size_t len)
{
	const char	*p = buf;
	int64_t		 dl;
	ssize_t		 n;
	int		 r;

	s->ctx = ctx;
	if ((r = usable(s, 1)) != GCK_OK)
		return r;
	dl = deadline(s);
	while (len > 0) {
		if ((r = gck_check_interrupt(ctx)) != GCK_OK)
			return r;
		if ((r = drain_stderr(s, &dl)) != GCK_OK)
			return r;
		/*
		 * Data sent on a closed channel would be lost unnoticed.
		 * What the remote said before it closed can still be read.
		 */
		if ((r = remote_closed(s)) != 0) {
			if (r < 0)
				return r;
			return ssh_error(s, GCK_ESSH, "connection lost: the "
			    "remote side closed the channel");
		}
		n = libssh2_channel_write(s->chan, p, len);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			dl = deadline(s);
			continue;
		}
		if (n < 0 && n != LIBSSH2_ERROR_EAGAIN)
			return ssh_fail(s, (int)n, "connection lost");
		/*
		 * No window, or a key re-exchange holds the packet back.
		 * libssh2 must be called again with the same data, so
		 * the connection cannot outlive an interrupt here.
		 */
		if ((r = wait_io(s, dl)) != GCK_OK) {
			if (s->dead == 0) {
				s->dead = r;
				snprintf(s->deadmsg, sizeof s->deadmsg, "%s",
				    gck_error_string(ctx));
			}
			return r;
		}
	}
	return GCK_OK;
}

ssize_t
gck_ssh_read(struct gck_ctx *ctx, struct gck_ssh *s, void *buf, size_t len)
{
	int64_t	dl;
	ssize_t	n;
	int	r;

	s->ctx = ctx;
	if ((r = usable(s, 1)) != GCK_OK)
		return r;
	if (len == 0)
		return ssh_error(s, GCK_EINVAL, "read of 0 bytes");
	dl = deadline(s);
	while (s->rpos == s->rlen && !s->eof) {
		if ((r = gck_check_interrupt(ctx)) != GCK_OK)
			return r;
		if ((r = drain_stderr(s, &dl)) != GCK_OK)
			return r;
		n = libssh2_channel_read(s->chan, s->rbuf, SSH_RBUF);
		if (n > 0) {
			s->rpos = 0;
			s->rlen = (size_t)n;
		} else if (n == 0)
			s->eof = 1;	/* libssh2 says 0 only at EOF */
		else if (n != LIBSSH2_ERROR_EAGAIN)
			return ssh_fail(s, (int)n, "connection lost");
		else if ((r = wait_io(s, dl)) != GCK_OK)
			return r;
	}
	if (len > s->rlen - s->rpos)
		len = s->rlen - s->rpos;
	memcpy(buf, s->rbuf + s->rpos, len);
	s->rpos += len;
	return (ssize_t)len;
}

int
gck_ssh_read_full(struct gck_ctx *ctx, struct gck_ssh *s, void *buf,
    size_t len)
{
	char	*p = buf;
	size_t	 got = 0;
	ssize_t	 n;

	while (got < len) {
		if ((n = gck_ssh_read(ctx, s, p + got, len - got)) < 0)
			return (int)n;
		if (n == 0) {
			gck_set_error(ctx, GCK_ETRUNC, "ssh %s: the remote "
			    "command ended its output after %zu of %zu bytes",
			    s->name, got, len);
			return gck_error_from(ctx, GCK_FROM_SSH);
		}
		got += (size_t)n;
	}
	return GCK_OK;
}

int
gck_ssh_pending(struct gck_ssh *s)
{
	int64_t	dl = -1;

	if (s == NULL || s->chan == NULL)
		return 0;
	s->ctx = NULL;
	if (s->dead != 0 || s->eof || s->rpos < s->rlen)
		return 1;
	if (drain_stderr(s, &dl) != GCK_OK)
		return 1;	/* the read reports it */
	if (libssh2_poll_channel_read(s->chan, 0))
		return 1;
	return libssh2_channel_eof(s->chan) == 1;
}

int
gck_ssh_send_eof(struct gck_ctx *ctx, struct gck_ssh *s)
{
	int64_t	dl;
	int	rc, r;

	s->ctx = ctx;
	if ((r = usable(s, 1)) != GCK_OK)
		return r;
	dl = deadline(s);
	while ((rc = libssh2_channel_send_eof(s->chan)) ==
	    LIBSSH2_ERROR_EAGAIN)
		if ((r = wait_io(s, dl)) != GCK_OK)
			return r;
	if (rc != 0)
		return ssh_fail(s, rc, "connection lost");
	return GCK_OK;
}

int
gck_ssh_exit_status(struct gck_ssh *s, int wait_ms)
{
	struct pollfd	 pfd;
	char		*sig = NULL;
	int64_t		 dl, left, dummy = -1;
	int		 st;

	if (s == NULL || s->chan == NULL)
		return -1;
	s->ctx = NULL;
	dl = gck_now_ms() + (wait_ms > 0 ? wait_ms : 0);
	while (!s->closed) {
		if (s->dead != 0 || drain_stderr(s, &dummy) != GCK_OK ||
		    remote_closed(s) < 0)
			return -1;
		if (s->closed || (left = dl - gck_now_ms()) <= 0)
			break;
		pfd.fd = s->fd;
		pfd.events = POLLIN;
		(void)poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);
	}
	if (!s->closed)
		return -1;
	if (libssh2_channel_get_exit_signal(s->chan, &sig, NULL, NULL, NULL,
	    NULL, NULL) == 0 && sig != NULL) {
		st = signum(sig);
		libssh2_free(s->sess, sig);
		return st != 0 ? 128 + st : 255;
	}
	return libssh2_channel_get_exit_status(s->chan);
}

const char *
gck_ssh_stderr(const struct gck_ssh *s)
{
	return s != NULL ? s->errline : "";
}

const char *
gck_ssh_name(const struct gck_ssh *s)
{
	return s != NULL ? s->name : "";
}

void
gck_ssh_close(struct gck_ssh *s)
{
	int64_t	dl;
	int	rc;

	if (s == NULL)
		return;
	s->ctx = NULL;
	if (s->sess != NULL) {
		/* A clean goodbye, but no long one; none to a dead peer. */
		if (s->timeout_ms == 0 || s->timeout_ms > SSH_CLOSE_MS)
			s->timeout_ms = SSH_CLOSE_MS;
		if (s->dead != 0 && s->fd != -1)
			shutdown(s->fd, SHUT_RDWR);
		dl = gck_now_ms() + SSH_CLOSE_MS;
		if (s->chan != NULL) {
			while ((rc = libssh2_channel_free(s->chan)) ==
			    LIBSSH2_ERROR_EAGAIN)
				if (wait_io(s, dl) != GCK_OK)
					shutdown(s->fd, SHUT_RDWR);
			s->chan = NULL;
		}
		if (s->dead == 0)
			while (libssh2_session_disconnect(s->sess, "") ==
			    LIBSSH2_ERROR_EAGAIN)
				if (wait_io(s, dl) != GCK_OK)
					shutdown(s->fd, SHUT_RDWR);
		while (libssh2_session_free(s->sess) == LIBSSH2_ERROR_EAGAIN)
			shutdown(s->fd, SHUT_RDWR);
	}
	if (s->fd != -1)
		close(s->fd);
	free(s->rbuf);
	free(s->ebuf);
	free(s);
}
