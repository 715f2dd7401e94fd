#ifndef GCK_OPS_INET_H
#define GCK_OPS_INET_H

struct InetSkEntry;
struct gck_inet_host;

/*
 * inet.c: a TCP or UDP socket of files.img (CRIU's inet_sk_entry), read
 * with what it lies about, said in words, and tried against this host as
 * criu restore binds it.
 */
#define GCK_INET_ADDRLEN	64	/* "[IPv6 address]:65535" and a NUL */

struct gck_inet {
	uint32_t	 id;
	int		 family;	/* AF_INET, AF_INET6; 0: not known */
	int		 type;		/* SOCK_STREAM, ...; 0: not known */
	int		 proto;		/* IPPROTO_TCP, ...; -1: not known */
	int		 state;		/* TCP_ESTABLISHED, ...; 0: not known */
	int		 addr;		/* the addresses and ports are known */
	int		 v6only;
	unsigned	 sport, dport;
	unsigned char	 src[16], dst[16];	/* 4 bytes of them for IPv4 */
	char		 ifname[16];
	int		 has_ns;
	uint32_t	 ns_id;		/* CRIU's id of its network namespace */
	char		 bad[96];	/* what the record lies about, or "" */
};

/* Returns 0, or -1 when the record lies (in->bad says how). */
int	gck_inet_read(const struct InetSkEntry *, struct gck_inet *);
/* Each a word, "unknown" where the record lies. */
const char *gck_inet_family(const struct gck_inet *);
const char *gck_inet_type(const struct gck_inet *);
const char *gck_inet_proto(const struct gck_inet *);
const char *gck_inet_state(const struct gck_inet *);
/* "TCP", "UDP", "UDP-Lite" or the protocol's word. */
const char *gck_inet_proto_name(const struct gck_inet *);
/*
 * The local (peer 0) or peer address into buf, as "ADDR:PORT" or,
 * without port, "ADDR" ("[ADDR]:PORT" for IPv6); "unknown" where the
 * record lies.
 */
void	gck_inet_addr(const struct gck_inet *, int, int, char *, size_t);
/* Whether the local (peer 0) or peer address is the wildcard one. */
int	gck_inet_any(const struct gck_inet *, int);
/* Whether criu restore binds it to its address and port. */
int	gck_inet_bound(const struct gck_inet *);
/* Whether it is a TCP connection, which criu restores bound to its address. */
int	gck_inet_connection(const struct gck_inet *);
/*
 * Binds a socket of this host as criu restore binds it (with anyport,
 * to its local address with port 0): 0 when it could, the errno of
 * bind() when not, -1 when no such socket can be made here.
 */
int	gck_inet_try_bind(const struct gck_inet *, int);
/* What /proc says of this host's sockets, read when first asked. */
struct gck_inet_host *gck_inet_host_new(void);
/*
 * The PID of a process here that holds the local port of in, or 0; then
 * *closedp says whether a connection closed (TIME_WAIT, or the like),
 * which no process holds, holds it yet.
 */
pid_t	gck_inet_holder(struct gck_inet_host *, const struct gck_inet *,
	    int *);
void	gck_inet_host_free(struct gck_inet_host *);

#endif /* GCK_OPS_INET_H */
