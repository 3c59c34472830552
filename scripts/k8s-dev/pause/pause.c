/* The real node's pod sandbox process ("pause"): PID 1 of a pod's shared
 * namespaces. It holds them open until told to stop, and reaps the
 * orphans a pod's containers leave (they are re-parented to it when the
 * pod shares its PID namespace). Built static by scripts/k8s-dev.sh into
 * the sandbox image; nothing of it is part of shoal. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int signal_number) { _exit(128 + signal_number); }

static void reap(int signal_number) {
  (void)signal_number;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  /* As PID 1 a signal without a handler is ignored: SIGTERM would wait for
   * the runtime's SIGKILL after its grace period. */
  struct sigaction on_stop = {.sa_handler = stop};
  struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  sigaction(SIGINT, &on_stop, NULL);
  sigaction(SIGTERM, &on_stop, NULL);
  sigaction(SIGCHLD, &on_child, NULL);
  for (;;) pause();
  return EXIT_FAILURE;
}
