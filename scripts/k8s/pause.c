/* The pod sandbox's pause process for the clusterctl test bed (scripts/k8s/images.sh builds it with
 * gcc -static into the registry.k8s.io/pause image). It does what upstream's pause does: sleeps until
 * SIGINT or SIGTERM and then exits 0, and reaps every child that gets re-parented to it (it is PID 1 of the
 * pod's PID namespace when the namespace is shared). `pause -v` prints its version. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static void sigdown(int signo) {
  psignal(signo, "Shutting down, got signal");
  exit(0);
}

static void sigreap(int signo) {
  (void)signo;
  while (waitpid(-1, NULL, WNOHANG) > 0)
    ;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    printf("pause.c clusterctl-testbed\n");
    return 0;
  }
  if (getpid() != 1)
    fprintf(stderr, "Warning: pause should be the first process\n");

  struct sigaction down = {.sa_handler = sigdown};
  struct sigaction reap = {.sa_handler = sigreap, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &down, NULL) < 0 || sigaction(SIGTERM, &down, NULL) < 0 ||
      sigaction(SIGCHLD, &reap, NULL) < 0) {
    perror("sigaction");
    return 1;
  }
  for (;;)
    pause();
  return 42;
}
