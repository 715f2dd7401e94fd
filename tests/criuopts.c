/*
 * criuopts: the workloads of t-criuopts.sh, each holding something that
 * criu dumps only when told to (a file lock, a unix socket connected to
 * a peer outside the tree), and the helpers that check it from outside.
 *
 *	criuopts flock|posix FILE DIR	take a lock on FILE, write DIR/ready;
 *		on DIR/go unlock it and write DIR/result; exit on DIR/exit
 *	criuopts trylock flock|posix FILE
 *		exit 0 if the lock could be taken (and drop it), 1 if it is
 *		held (a POSIX lock: print its holder's pid), 2 on error
 *	criuopts dgram-peer|stream-peer PATH DIR
 *		bind PATH, write DIR/ready, append each message received to
 *		DIR/received, one a line, and "end" when a stream connection
 *		ends
 *	criuopts dgram|stream PATH DIR	connect to PATH and send "before PID";
 *		write DIR/ready; on DIR/go send "after PID", write DIR/result
 *	criuopts tcp-peer - DIR		the same as stream-peer, listening on
 *		127.0.0.1, its port in DIR/port
 *	criuopts tcp PORT DIR		the same as stream, connected to PORT
 *		of 127.0.0.1
 *
 * DIR/ready holds the pid, DIR/result "ok CASE" or "FAIL CASE: why";
 * both are written to a temporary name and renamed.
 */
#include "config.h"

#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>

#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char	*dir;

static void
msleep(int ms)
{
	struct timespec	ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* Writes DIR/name atomically. */
static void
put(const char *name, const char *fmt, ...)
{
	char	tmp[4096], path[4096];
	va_list	ap;
	FILE	*f;

	snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if ((f = fopen(tmp, "w")) == NULL) {
		perror(tmp);
		exit(2);
	}
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	if (fclose(f) != 0 || rename(tmp, path) == -1) {
		perror(path);
		exit(2);
	}
}

/* Waits, in short sleeps, for DIR/name to exist. */
static void
await(const char *name)
{
	char		path[4096];
	struct stat	st;
	int		i;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	for (i = 0; i < 60 * 50; i++) {
		if (stat(path, &st) == 0)
			return;
		msleep(20);
	}
	fprintf(stderr, "criuopts: no %s after 60 s\n", path);
	exit(2);
}

static int
lock_posix(int fd, int type, int wait)
{
	struct flock	fl;

	memset(&fl, 0, sizeof fl);
	fl.l_type = type;
	fl.l_whence = SEEK_SET;
	return fcntl(fd, wait ? F_SETLKW : F_SETLK, &fl);
}

static int
hold_lock(const char *kind, const char *file)
{
	int	fd, posix = strcmp(kind, "posix") == 0;

	if ((fd = open(file, O_RDWR | O_CREAT, 0600)) == -1) {
		perror(file);
		return 2;
	}
	if (posix ? lock_posix(fd, F_WRLCK, 0) : flock(fd, LOCK_EX | LOCK_NB)) {
		perror("lock");
		return 2;
	}
	put("ready", "%d\n", (int)getpid());
	await("go");
	if (posix ? lock_posix(fd, F_UNLCK, 0) : flock(fd, LOCK_UN)) {
		put("result", "FAIL %s: unlock: %s\n", kind, strerror(errno));
		return 1;
	}
	put("result", "ok %s\n", kind);
	await("exit");
	return 0;
}

static int
try_lock(const char *kind, const char *file)
{
	struct flock	fl;
	int		fd, posix = strcmp(kind, "posix") == 0;

	if ((fd = open(file, O_RDWR)) == -1) {
		perror(file);
		return 2;
	}
	if (posix) {
		memset(&fl, 0, sizeof fl);
		fl.l_type = F_WRLCK;
		fl.l_whence = SEEK_SET;
		if (fcntl(fd, F_GETLK, &fl) == -1) {
			perror("F_GETLK");
			return 2;
		}
		if (fl.l_type != F_UNLCK) {
			printf("held by %d\n", (int)fl.l_pid);
			return 1;
		}
		if (lock_posix(fd, F_WRLCK, 0) == -1) {
			printf("held\n");
			return errno == EAGAIN || errno == EACCES ? 1 : 2;
		}
		return 0;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		printf("held\n");
		return errno == EWOULDBLOCK ? 1 : 2;
	}
	return 0;
}

static int
unix_socket(const char *path, int type, int bind_it)
{
	struct sockaddr_un	sun;
	int			fd;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sun.sun_path) {
		fprintf(stderr, "criuopts: '%s' is too long\n", path);
		exit(2);
	}
	strcpy(sun.sun_path, path);
	if ((fd = socket(AF_UNIX, type, 0)) == -1 ||
	    (bind_it ? bind(fd, (struct sockaddr *)&sun, sizeof sun) :
	    connect(fd, (struct sockaddr *)&sun, sizeof sun)) == -1) {
		perror(path);
		exit(2);
	}
	return fd;
}

/* A TCP socket on 127.0.0.1: listening on any port, or connected. */
static int
tcp_socket(int port)
{
	struct sockaddr_in	sin;
	socklen_t		len = sizeof sin;
	int			fd;

	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((unsigned short)port);
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1 ||
	    (port == 0 ? bind(fd, (struct sockaddr *)&sin, sizeof sin) :
	    connect(fd, (struct sockaddr *)&sin, sizeof sin)) == -1) {
		perror("tcp");
		exit(2);
	}
	if (port == 0) {
		if (getsockname(fd, (struct sockaddr *)&sin, &len) == -1) {
			perror("getsockname");
			exit(2);
		}
		put("port", "%d\n", ntohs(sin.sin_port));
	}
	return fd;
}

static void
record(const char *msg, size_t len)
{
	char	path[4096];
	FILE	*f;

	snprintf(path, sizeof path, "%s/received", dir);
	if ((f = fopen(path, "a")) == NULL) {
		perror(path);
		exit(2);
	}
	fprintf(f, "%.*s\n", (int)len, msg);
	fclose(f);
}

static int
peer(const char *path, int type)
{
	char	buf[256];
	ssize_t	n;
	int	fd, c;

	if (path != NULL) {
		unlink(path);
		fd = unix_socket(path, type, 1);
	} else
		fd = tcp_socket(0);
	if (type == SOCK_STREAM && listen(fd, 4) == -1) {
		perror("listen");
		return 2;
	}
	put("ready", "%d\n", (int)getpid());
	for (;;) {
		c = fd;
		if (type == SOCK_STREAM && (c = accept(fd, NULL, NULL)) == -1) {
			perror("accept");
			return 2;
		}
		/* One message a datagram; a line at a time on a stream. */
		while ((n = recv(c, buf, sizeof buf, 0)) > 0) {
			while (n > 0 && buf[n - 1] == '\n')
				n--;
			record(buf, (size_t)n);
		}
		if (type == SOCK_DGRAM) {
			perror("recv");
			return 2;
		}
		record("end", 3);
		close(c);
	}
}

static int
client(const char *kind, const char *path, int type)
{
	char	msg[64];
	int	fd, n;

	fd = path[0] == '/' ? unix_socket(path, type, 0) :
	    tcp_socket(atoi(path));
	n = snprintf(msg, sizeof msg, "before %d%s", (int)getpid(),
	    type == SOCK_STREAM ? "\n" : "");
	if (send(fd, msg, (size_t)n, 0) != n) {
		perror("send");
		return 2;
	}
	put("ready", "%d\n", (int)getpid());
	await("go");
	n = snprintf(msg, sizeof msg, "after %d%s", (int)getpid(),
	    type == SOCK_STREAM ? "\n" : "");
	if (send(fd, msg, (size_t)n, 0) != n) {
		put("result", "FAIL %s: send: %s\n", kind, strerror(errno));
		return 1;
	}
	put("result", "ok %s\n", kind);
	return 0;
}

int
main(int argc, char *argv[])
{
	int	fd;

	/* Nothing of the test's own (its log) for criu to dump. */
	for (fd = 3; fd < 1024; fd++)
		close(fd);
	if (argc == 4 && strcmp(argv[1], "trylock") == 0)
		return try_lock(argv[2], argv[3]);
	if (argc != 4)
		goto usage;
	dir = argv[3];
	if (strcmp(argv[1], "flock") == 0 || strcmp(argv[1], "posix") == 0)
		return hold_lock(argv[1], argv[2]);
	if (strcmp(argv[1], "dgram-peer") == 0)
		return peer(argv[2], SOCK_DGRAM);
	if (strcmp(argv[1], "stream-peer") == 0)
		return peer(argv[2], SOCK_STREAM);
	if (strcmp(argv[1], "dgram") == 0)
		return client(argv[1], argv[2], SOCK_DGRAM);
	if (strcmp(argv[1], "stream") == 0 || strcmp(argv[1], "tcp") == 0)
		return client(argv[1], argv[2], SOCK_STREAM);
	if (strcmp(argv[1], "tcp-peer") == 0)
		return peer(NULL, SOCK_STREAM);
usage:
	fprintf(stderr, "usage: criuopts flock|posix|dgram|stream|tcp|"
	    "dgram-peer|stream-peer|tcp-peer ARG DIR\n"
	    "       criuopts trylock flock|posix FILE\n");
	return 2;
}
