/*
 * gpuckpt-keeper: the process under which gpurestore and gpurecv run
 * criu restore, installed in $(libexecdir)/gpuckpt.  It leads a
 * session of its own and adopts the restored tree when criu exits, so
 * that a shell job's process group is not orphaned (keeper.c says
 * why).  A program of its own, run with fexecve(2), so that it holds
 * none of the restoring command's memory.
 *
 * usage: gpuckpt-keeper [-f N] [-n MAXPID:ROOT] criu restore ..., with
 * N descriptors from 6 on for criu to inherit, criu's report to go out
 * on descriptor 3, the word to go to come in on 4, and the guard's pipe
 * on 5: gck_keeper_start() runs it so.
 */
#include "config.h"

#include <stdio.h>

#include "gpuckpt.h"

int
main(int argc, char *argv[])
{
	if (argc < 2) {
		fprintf(stderr, "usage: gpuckpt-keeper criu-command "
		    "[argument ...]\n");
		return 127;
	}
	return gck_keeper_run(argv + 1) == GCK_OK ? 0 : 1;
}
