package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is printed by -v.
const version = "embedops-pause 3.10"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println(version)
		return
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	sleep(signals, reapAll, nil)
}
