/*
 * inet.c: the TCP and UDP sockets of an image, as files.img records them
 * (CRIU's inet_sk_entry, one per socket, named by the descriptors of
 * fdinfo-N.img), and how criu restore would take them on this host.
 *
 * gck_inet_read() reads a record and says what it lies about: every
 * byte of it is the image's.  criu restore makes each socket again with
 * SO_REUSEADDR and SO_REUSEPORT set, binds it to its address and port
 * (an IPv6 one with IP_FREEBIND) and listens or connects; a TCP
 * connection it binds in repair mode to the address it had, which this
 * host must have, unless it restores the connection closed (--tcp-close).
 * gck_inet_try_bind() binds a socket here in the same way, and
 * gck_inet_holder() finds who holds a port that is taken, from
 * /proc/net/tcp (tcp6, udp, ...) and the descriptors in /proc/PID/fd.
 */
#include "config.h"

#include <sys/socket.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"
#include "ops/inet.h"
#include "criu/criu-images.pb-c.h"

#ifndef IPPROTO_UDPLITE
#define IPPROTO_UDPLITE	136
#endif

/* The kernel's TCP states (include/net/tcp_states.h) */
#define ST_ESTABLISHED	1
#define ST_CLOSE	7
#define ST_LISTEN	10
#define ST_MAX		11

#define NTABLES		6	/* tcp tcp6 udp udp6 udplite udplite6 */

/* A socket of /proc/net/TABLE. */
struct netsk {
	unsigned char	 addr[16];	/* IPv4 as ::ffff:a.b.c.d */
	unsigned	 port, state;
	unsigned long	 ino;
};

/* A socket's inode, and a process that holds it. */
struct owner {
	unsigned long	 ino;
	pid_t		 pid;
};

struct gck_inet_host {
	struct netsk	*t[NTABLES];
	size_t		 n[NTABLES];
	int		 read[NTABLES];
	struct owner	*o;		/* by inode */
	size_t		 no;
	int		 oread;
};

static const char *const tables[NTABLES] = { "tcp", "tcp6", "udp",
	"udp6", "udplite", "udplite6" };

static const char *const states[ST_MAX + 1] = { NULL, "established",
	"syn-sent", "syn-recv", "fin-wait-1", "fin-wait-2", "time-wait",
	"unconnected", "close-wait", "last-ack", "listening", "closing" };

static void	 lie(struct gck_inet *, const char *, ...)
		    __attribute__((__format__(__printf__, 2, 3)));
static int	 proto_known(int, uint32_t);
static int	 read_addr(struct gck_inet *, const uint32_t *, size_t,
		    unsigned char *);
static void	 mapped(const struct gck_inet *, int, unsigned char [16]);
static int	 hexaddr(const char *, unsigned char [16]);
static int	 table_read(struct gck_inet_host *, int);
static int	 owner_cmp(const void *, const void *);
static int	 owners_read(struct gck_inet_host *);
static int	 proc_owners(struct gck_inet_host *, pid_t, size_t *);
static int	 is_any(const unsigned char [16]);
static const struct netsk *best(struct gck_inet_host *,
		    const struct gck_inet *);

/* Records the first thing the record lies about. */
static void
lie(struct gck_inet *in, const char *fmt, ...)
{
	va_list	ap;

	if (in->bad[0] != '\0')
		return;
	va_start(ap, fmt);
	vsnprintf(in->bad, sizeof in->bad, fmt, ap);
	va_end(ap);
}

/* Whether a socket of type has a protocol criu dumps. */
static int
proto_known(int type, uint32_t proto)
{
	switch (type) {
	case SOCK_STREAM:
		return proto == IPPROTO_TCP;
	case SOCK_DGRAM:
		return proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE ||
		    proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6;
	case SOCK_RAW:
		return proto <= 255;
	default:
		return 0;
	}
}

/*
 * The n words of an address of in's family into a: one for IPv4 (CRIU
 * of old wrote four, the first of them the address), four for IPv6.
 * Returns 0, or -1 when n is not that.
 */
static int
read_addr(struct gck_inet *in, const uint32_t *w, size_t n, unsigned char *a)
{
	if (in->family == AF_INET && n >= 1 && n <= 4) {
		memcpy(a, w, 4);
		return 0;
	}
	if (in->family == AF_INET6 && n == 4) {
		memcpy(a, w, 16);
		return 0;
	}
	lie(in, "an address of %zu words for %s", n, in->family == AF_INET ?
	    "IPv4" : "IPv6");
	return -1;
}

int
gck_inet_read(const InetSkEntry *ie, struct gck_inet *in)
{
	int	ok = 1;

	memset(in, 0, sizeof *in);
	in->id = ie->id;
	in->proto = -1;
	if (ie->family == AF_INET || ie->family == AF_INET6)
		in->family = (int)ie->family;
	else {
		lie(in, "an unknown family (%" PRIu32 ")", ie->family);
		ok = 0;
	}
	if (ie->type == SOCK_STREAM || ie->type == SOCK_DGRAM ||
	    ie->type == SOCK_RAW)
		in->type = (int)ie->type;
	else
		lie(in, "an unknown type (%" PRIu32 ")", ie->type);
	if (in->type != 0 && proto_known(in->type, ie->proto))
		in->proto = (int)ie->proto;
	else if (in->type != 0)
		lie(in, "an unknown protocol (%" PRIu32 ")", ie->proto);
	if (ie->state >= 1 && ie->state <= ST_MAX)
		in->state = (int)ie->state;
	else
		lie(in, "an unknown state (%" PRIu32 ")", ie->state);
	if (in->state == ST_LISTEN && (in->type != SOCK_STREAM ||
	    in->proto != IPPROTO_TCP)) {
		lie(in, "a listening socket that is not TCP");
		in->state = 0;
	}
	if (ie->src_port > 65535 || ie->dst_port > 65535) {
		lie(in, "a port above 65535 (%" PRIu32 ")", ie->src_port >
		    65535 ? ie->src_port : ie->dst_port);
		ok = 0;
	}
	if (ok && (read_addr(in, ie->src_addr, ie->n_src_addr, in->src) ==
	    -1 || read_addr(in, ie->dst_addr, ie->n_dst_addr, in->dst) == -1))
		ok = 0;
	in->addr = ok;
	in->sport = ie->src_port;
	in->dport = ie->dst_port;
	in->v6only = ie->has_v6only && ie->v6only;
	if (ie->ifname != NULL)
		snprintf(in->ifname, sizeof in->ifname, "%s", ie->ifname);
	in->has_ns = ie->has_ns_id;
	in->ns_id = ie->ns_id;
	return in->bad[0] == '\0' ? 0 : -1;
}

const char *
gck_inet_family(const struct gck_inet *in)
{
	return in->family == AF_INET ? "inet" : in->family == AF_INET6 ?
	    "inet6" : "unknown";
}

const char *
gck_inet_type(const struct gck_inet *in)
{
	return in->type == SOCK_STREAM ? "stream" : in->type == SOCK_DGRAM ?
	    "dgram" : in->type == SOCK_RAW ? "raw" : "unknown";
}

const char *
gck_inet_proto(const struct gck_inet *in)
{
	if (in->type == SOCK_RAW && in->proto >= 0)
		return "raw";
	switch (in->proto) {
	case IPPROTO_TCP:
		return "tcp";
	case IPPROTO_UDP:
		return "udp";
	case IPPROTO_UDPLITE:
		return "udplite";
	case IPPROTO_ICMP:
		return "icmp";
	case IPPROTO_ICMPV6:
		return "icmpv6";
	default:
		return "unknown";
	}
}

const char *
gck_inet_proto_name(const struct gck_inet *in)
{
	switch (in->proto) {
	case IPPROTO_TCP:
		return "TCP";
	case IPPROTO_UDP:
		return "UDP";
	case IPPROTO_UDPLITE:
		return "UDP-Lite";
	default:
		return gck_inet_proto(in);
	}
}

/* A connected socket of another protocol than TCP is "connected". */
const char *
gck_inet_state(const struct gck_inet *in)
{
	if (in->state == 0)
		return "unknown";
	if (in->state == ST_ESTABLISHED && in->proto != IPPROTO_TCP)
		return "connected";
	return states[in->state];
}

void
gck_inet_addr(const struct gck_inet *in, int peer, int port, char *buf,
    size_t len)
{
	char		 a[INET6_ADDRSTRLEN];
	const void	*p = peer ? in->dst : in->src;

	if (!in->addr || inet_ntop(in->family, p, a, sizeof a) == NULL) {
		snprintf(buf, len, "unknown");
		return;
	}
	if (!port)
		snprintf(buf, len, "%s", a);
	else
		snprintf(buf, len, in->family == AF_INET6 ? "[%s]:%u" :
		    "%s:%u", a, peer ? in->dport : in->sport);
}

/* The address as 16 bytes, IPv4 as ::ffff:a.b.c.d. */
static void
mapped(const struct gck_inet *in, int peer, unsigned char a[16])
{
	const unsigned char	*p = peer ? in->dst : in->src;

	if (in->family == AF_INET6) {
		memcpy(a, p, 16);
		return;
	}
	memset(a, 0, 10);
	a[10] = a[11] = 0xff;
	memcpy(a + 12, p, 4);
}

static int
is_any(const unsigned char a[16])
{
	static const unsigned char	z[16];

	return memcmp(a, z, 16) == 0 || (memcmp(a, z, 10) == 0 &&
	    a[10] == 0xff && a[11] == 0xff && memcmp(a + 12, z, 4) == 0);
}

int
gck_inet_any(const struct gck_inet *in, int peer)
{
	unsigned char	a[16];

	mapped(in, peer, a);
	return is_any(a);
}

int
gck_inet_bound(const struct gck_inet *in)
{
	return in->addr && in->sport != 0 && in->type != SOCK_RAW &&
	    (in->proto == IPPROTO_TCP || in->proto == IPPROTO_UDP ||
	    in->proto == IPPROTO_UDPLITE) && !gck_inet_connection(in);
}

int
gck_inet_connection(const struct gck_inet *in)
{
	return in->addr && in->type == SOCK_STREAM &&
	    in->proto == IPPROTO_TCP && in->dport != 0;
}

int
gck_inet_try_bind(const struct gck_inet *in, int anyport)
{
	struct sockaddr_in6	 s6;
	struct sockaddr_in	 s4;
	struct sockaddr		*sa;
	socklen_t		 salen;
	int			 fd, yes = 1, e;

	if (!in->addr || in->type == 0 || in->proto < 0)
		return -1;
	if ((fd = socket(in->family, in->type | SOCK_CLOEXEC, in->proto)) ==
	    -1)
		return -1;
	e = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes) ==
	    -1 || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &yes, sizeof yes) ==
	    -1 || (in->v6only && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY,
	    &yes, sizeof yes) == -1) || (in->family == AF_INET6 && !anyport &&
	    setsockopt(fd, SOL_IP, IP_FREEBIND, &yes, sizeof yes) == -1);
	if (e) {
		close(fd);
		return -1;
	}
	if (in->family == AF_INET) {
		memset(&s4, 0, sizeof s4);
		s4.sin_family = AF_INET;
		s4.sin_port = htons(anyport ? 0 : (uint16_t)in->sport);
		memcpy(&s4.sin_addr, in->src, 4);
		sa = (struct sockaddr *)&s4;
		salen = sizeof s4;
	} else {
		memset(&s6, 0, sizeof s6);
		s6.sin6_family = AF_INET6;
		s6.sin6_port = htons(anyport ? 0 : (uint16_t)in->sport);
		memcpy(&s6.sin6_addr, in->src, 16);
		if (in->ifname[0] != '\0')
			s6.sin6_scope_id = if_nametoindex(in->ifname);
		sa = (struct sockaddr *)&s6;
		salen = sizeof s6;
	}
	e = bind(fd, sa, salen) == -1 ? errno : 0;
	close(fd);
	return e;
}

struct gck_inet_host *
gck_inet_host_new(void)
{
	return calloc(1, sizeof(struct gck_inet_host));
}

void
gck_inet_host_free(struct gck_inet_host *h)
{
	size_t	i;

	if (h == NULL)
		return;
	for (i = 0; i < NTABLES; i++)
		free(h->t[i]);
	free(h->o);
	free(h);
}

/*
 * An address of /proc/net/TABLE: 8 hex digits for IPv4, 32 for IPv6,
 * each 32-bit word of it as the host's number.  Returns 0 or -1.
 */
static int
hexaddr(const char *s, unsigned char a[16])
{
	size_t		n = strlen(s), i;
	uint32_t	w;
	char		word[9];

	if (n != 8 && n != 32)
		return -1;
	for (i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return -1;
	memset(a, 0, 16);
	for (i = 0; i < n / 8; i++) {
		memcpy(word, s + i * 8, 8);
		word[8] = '\0';
		w = (uint32_t)strtoul(word, NULL, 16);
		memcpy(n == 8 ? a + 12 : a + i * 4, &w, 4);
	}
	if (n == 8)
		a[10] = a[11] = 0xff;
	return 0;
}

/* Reads /proc/net/TABLE t once.  Returns 0 or -1. */
static int
table_read(struct gck_inet_host *h, int t)
{
	char		 path[64], line[512], la[40], ra[40];
	unsigned	 lp, rp, st;
	unsigned long	 ino;
	struct netsk	*e, *p;
	size_t		 cap = 0;
	FILE		*fp;

	if (h->read[t])
		return 0;
	h->read[t] = 1;
	snprintf(path, sizeof path, "/proc/net/%s", tables[t]);
	if ((fp = fopen(path, "re")) == NULL)
		return -1;
	while (fgets(line, sizeof line, fp) != NULL) {
		if (sscanf(line, " %*u: %39[0-9A-Fa-f]:%x %39[0-9A-Fa-f]:%x %x "
		    "%*s %*s %*s %*u %*u %lu", la, &lp, ra, &rp, &st, &ino) !=
		    6)
			continue;
		if (h->n[t] == cap) {
			cap = cap ? cap * 2 : 64;
			if ((p = reallocarray(h->t[t], cap, sizeof *p)) ==
			    NULL)
				break;
			h->t[t] = p;
		}
		e = &h->t[t][h->n[t]];
		if (hexaddr(la, e->addr) == -1)
			continue;
		e->port = lp;
		e->state = st;
		e->ino = ino;
		h->n[t]++;
	}
	fclose(fp);
	return 0;
}

static int
owner_cmp(const void *a, const void *b)
{
	const struct owner	*x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* The sockets that process pid holds, into h->o. */
static int
proc_owners(struct gck_inet_host *h, pid_t pid, size_t *capp)
{
	struct dirent	*d;
	struct owner	*p;
	DIR		*dp;
	char		 path[64], link[64];
	unsigned long	 ino;
	ssize_t		 n;
	int		 dfd;

	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	if ((dp = opendir(path)) == NULL)
		return 0;
	dfd = dirfd(dp);
	while ((d = readdir(dp)) != NULL) {
		if (!isdigit((unsigned char)d->d_name[0]) ||
		    (n = readlinkat(dfd, d->d_name, link, sizeof link - 1)) <=
		    0)
			continue;
		link[n] = '\0';
		if (sscanf(link, "socket:[%lu]", &ino) != 1)
			continue;
		if (h->no == *capp) {
			*capp = *capp ? *capp * 2 : 256;
			if ((p = reallocarray(h->o, *capp, sizeof *p)) ==
			    NULL) {
				closedir(dp);
				return -1;
			}
			h->o = p;
		}
		h->o[h->no].ino = ino;
		h->o[h->no++].pid = pid;
	}
	closedir(dp);
	return 0;
}

/* Every process's sockets, read once, sorted by inode. */
static int
owners_read(struct gck_inet_host *h)
{
	struct dirent	*d;
	DIR		*dp;
	size_t		 cap = 0;
	long		 pid;
	char		*end;

	if (h->oread)
		return 0;
	h->oread = 1;
	if ((dp = opendir("/proc")) == NULL)
		return -1;
	while ((d = readdir(dp)) != NULL) {
		pid = strtol(d->d_name, &end, 10);
		if (*end != '\0' || pid <= 0)
			continue;
		if (proc_owners(h, (pid_t)pid, &cap) == -1)
			break;
	}
	closedir(dp);
	qsort(h->o, h->no, sizeof *h->o, owner_cmp);
	return 0;
}

/*
 * The socket of this host that takes in's local port from it, or NULL:
 * one a process holds before one of none (a connection closed, in
 * TIME_WAIT or the like), a listening one, then one at the same address
 * before one at an address that overlaps it (the wildcard address).
 */
static const struct netsk *
best(struct gck_inet_host *h, const struct gck_inet *in)
{
	const struct netsk	*e, *b = NULL;
	unsigned char		 a[16];
	size_t			 i;
	int			 t, t0, score, top = 0;

	t0 = in->proto == IPPROTO_TCP ? 0 : in->proto == IPPROTO_UDP ? 2 : 4;
	mapped(in, 0, a);
	for (t = t0; t < t0 + 2; t++) {
		if (table_read(h, t) == -1)
			continue;
		for (i = 0; i < h->n[t]; i++) {
			e = &h->t[t][i];
			if (e->port != in->sport || (memcmp(e->addr, a, 16) !=
			    0 && !is_any(e->addr) && !is_any(a)))
				continue;
			score = 1 + (memcmp(e->addr, a, 16) == 0) +
			    2 * (e->state == ST_LISTEN || t0 != 0) +
			    4 * (e->ino != 0);
			if (score > top) {
				top = score;
				b = e;
			}
		}
	}
	return b;
}

pid_t
gck_inet_holder(struct gck_inet_host *h, const struct gck_inet *in,
    int *closedp)
{
	const struct netsk	*e;
	struct owner		 key, *o;

	*closedp = 0;
	if (h == NULL || !in->addr || (e = best(h, in)) == NULL)
		return 0;
	if (e->ino == 0) {
		*closedp = 1;
		return 0;
	}
	if (owners_read(h) == -1)
		return 0;
	key.ino = e->ino;
	o = bsearch(&key, h->o, h->no, sizeof *h->o, owner_cmp);
	return o != NULL ? o->pid : 0;
}
