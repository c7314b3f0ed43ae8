package main

import (
	"fmt"
	"log"
	"os"
	"sync"

	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// devLog receives what the libraries dev uses log (controller-runtime's
// client, client-go's warnings), so that the terminal shows only dev's own
// story: a file in the dev directory while up runs, nowhere otherwise.
var devLog = &logFile{}

// init gives controller-runtime and klog their logger before anything
// logs: without one controller-runtime prints a stack trace saying
// log.SetLogger was never called. The git server (gitkit) logs every
// request with the standard library's log.
func init() {
	logger := funcr.New(devLog.write, funcr.Options{Verbosity: 1})
	ctrllog.SetLogger(logger)
	klog.SetLogger(logger)
	log.SetOutput(devLog)
}

// logFile is a log destination that can be opened and closed while
// loggers hold it.
type logFile struct {
	mu   sync.Mutex
	file *os.File
}

// open sends the logs to path; a file that cannot be created leaves them
// dropped.
func (l *logFile) open(path string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if file, err := os.Create(path); err == nil {
		l.file = file
	}
}

// close closes the file; later logs are dropped.
func (l *logFile) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		_ = l.file.Close()
		l.file = nil
	}
}

// Write writes p to the file, if open.
func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		return l.file.Write(p)
	}
	return len(p), nil
}

// write is funcr's output function.
func (l *logFile) write(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		fmt.Fprintln(l.file, prefix, args)
	}
}
