/* tlat: how late does a SCHED_FIFO thread wake from a 500 us absolute sleep on this VM? */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
  int cpu = argc > 1 ? atoi(argv[1]) : 0, secs = argc > 2 ? atoi(argv[2]) : 10;
  cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); sched_setaffinity(0, sizeof s, &s);
  struct sched_param p = { .sched_priority = 10 }; sched_setscheduler(0, SCHED_FIFO, &p);
  struct timespec t, now; clock_gettime(CLOCK_MONOTONIC, &t);
  long n = (long)secs * 2000, over1ms = 0, over100us = 0; double max = 0, sum = 0;
  for (long i = 0; i < n; i++) {
    t.tv_nsec += 500000; if (t.tv_nsec >= 1000000000) { t.tv_nsec -= 1000000000; t.tv_sec++; }
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
    clock_gettime(CLOCK_MONOTONIC, &now);
    double late = (now.tv_sec - t.tv_sec) * 1e6 + (now.tv_nsec - t.tv_nsec) / 1e3;
    sum += late; if (late > max) max = late; if (late > 1000) over1ms++; if (late > 100) over100us++;
  }
  printf("wakeups %ld mean_late_us %.1f max_late_us %.1f over_100us %ld over_1ms %ld\n", n, sum / n, max, over100us, over1ms);
  return 0;
}
