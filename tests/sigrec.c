/*
 * sigrec -- a process that notes the signals it is sent, for tests of
 * gpurestore --wait.
 *
 * usage: sigrec FILE
 *
 * It appends "ready pid=PID" to FILE, then one line naming each SIGHUP,
 * SIGINT, SIGUSR1 and SIGUSR2 it gets ("got USR1"); SIGTERM ends it as
 * by default.  Once FILE.exit exists it exits with the number in it.
 * FILE is opened for each line, so that it never stays open across a
 * checkpoint; descriptors other than 0, 1 and 2 that it inherits are
 * closed first.  FILE.exit is best made by rename(2); until a number
 * can be read from it, it is looked at again.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char	*file;
static char		 exitfile[4096];

static void
note(const char *line)
{
	int	fd, e = errno;

	if ((fd = open(file, O_WRONLY | O_APPEND | O_CREAT, 0644)) != -1) {
		(void)write(fd, line, strlen(line));
		close(fd);
	}
	errno = e;
}

static void
closefrom_3(void)
{
	int	fd;

	for (fd = 3; fd < 1024; fd++)
		close(fd);
}

static void
on_signal(int sig)
{
	switch (sig) {
	case SIGHUP:
		note("got HUP\n");
		break;
	case SIGINT:
		note("got INT\n");
		break;
	case SIGUSR1:
		note("got USR1\n");
		break;
	case SIGUSR2:
		note("got USR2\n");
		break;
	}
}

int
main(int argc, char *argv[])
{
	const struct timespec	 tick = { 0, 20 * 1000 * 1000 };
	struct sigaction	 sa;
	sigset_t		 none;
	char			 buf[64];
	FILE			*f;
	int			 sigs[] = { SIGHUP, SIGINT, SIGUSR1, SIGUSR2 };
	int			 code;
	size_t			 i;

	if (argc != 2) {
		fprintf(stderr, "usage: sigrec file\n");
		return 2;
	}
	file = argv[1];
	closefrom_3();
	snprintf(exitfile, sizeof exitfile, "%s.exit", file);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		sigaction(sigs[i], &sa, NULL);
	signal(SIGTERM, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	snprintf(buf, sizeof buf, "ready pid=%d\n", (int)getpid());
	note(buf);
	for (;;) {
		if ((f = fopen(exitfile, "r")) != NULL) {
			if (fscanf(f, "%d", &code) == 1) {
				fclose(f);
				return code;
			}
			fclose(f);
		}
		nanosleep(&tick, NULL);
	}
}
