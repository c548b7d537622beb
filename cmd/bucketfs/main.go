// Command bucketfs mounts a Google Cloud Storage bucket as a directory,
// with a cache on local disk.
//
//	bucketfs mount BUCKET MOUNTPOINT [flags]
//	bucketfs status MOUNTPOINT
//	bucketfs flush MOUNTPOINT
//	bucketfs version
package main

import (
	"errors"
	"fmt"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// exit codes
const (
	exitOK      = 0
	exitFailure = 1 // the mount could not start or ended badly
	exitUsage   = 2 // bad command line
)

// usageError is a mistake on the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, topUsage)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "mount":
		err = runMount(args[1:])
	case "status":
		err = runStatus(args[1:])
	case "flush":
		err = runFlush(args[1:])
	case "version", "--version":
		fmt.Println("bucketfs", version)
		return exitOK
	case "help", "-h", "--help":
		fmt.Print(topUsage)
		return exitOK
	default:
		err = &usageError{fmt.Sprintf("unknown command %q", args[0])}
	}
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(os.Stderr, "bucketfs:", err)
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(os.Stderr, "Run 'bucketfs help' or 'bucketfs mount --help' for usage.")
		return exitUsage
	}
	return exitFailure
}

const topUsage = `bucketfs mounts a Google Cloud Storage bucket as a directory, served from a
cache on local disk.

Usage:
  bucketfs mount BUCKET MOUNTPOINT [flags]   mount in the foreground; Ctrl-C or
                                             SIGTERM unmounts
  bucketfs status MOUNTPOINT                 what a running mount is doing: cache,
                                             changes not yet uploaded, errors
  bucketfs flush MOUNTPOINT                  upload every change now and wait
  bucketfs version                           print the version

Run 'bucketfs mount --help' for the mount flags.
`
