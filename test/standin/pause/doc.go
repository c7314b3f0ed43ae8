// Command pause is the sandbox container of the real node's pods, as the
// kubelet's pause image is (kubernetes build/pause/linux/pause.c): it
// sleeps until SIGINT or SIGTERM, then exits 0, and reaps every child that
// exits meanwhile (it is PID 1 of a pod that shares its process namespace).
// "-v" prints its version and exits, as pause.c does.
package main
