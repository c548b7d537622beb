// Command bucketfs mounts a Google Cloud Storage bucket as a directory,
// with a cache on local disk.
//
//	bucketfs mount BUCKET MOUNTPOINT [flags]
//	bucketfs status MOUNTPOINT
//	bucketfs flush MOUNTPOINT
//	bucketfs warm PATH... [--pin], bucketfs unpin PATH...
//	bucketfs fsck --cache-dir DIR [--rebuild]
//	bucketfs version
//	mount.fuse.bucketfs BUCKET MOUNTPOINT [-sfnv] [-o OPTIONS]   (mount helper, see mounthelper.go)
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
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
	statusPipe = openStatusPipe()
	if isHelperCall(os.Args[0], os.Args[1:]) {
		os.Exit(runHelper(os.Args[1:]))
	}
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
	case "resolve":
		err = runResolve(args[1:])
	case "warm":
		err = runWarm(args[1:])
	case "unpin":
		err = runUnpin(args[1:])
	case "fsck":
		err = runFsck(args[1:])
	case "version", "--version":
		fmt.Println(versionLine())
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
	msg := redactString(err.Error())
	fmt.Fprintln(os.Stderr, "bucketfs:", msg)
	reportStatus("error: " + msg)
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(os.Stderr, "Run 'bucketfs help' or 'bucketfs mount --help' for usage.")
		return exitUsage
	}
	return exitFailure
}

// versionLine is "bucketfs VERSION (go1.x linux/amd64)"; a build without
// -ldflags (go install) names its module version or commit.
func versionLine() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && v == "dev" && len(s.Value) >= 12 {
				v = "dev-" + s.Value[:12]
			}
		}
	}
	return fmt.Sprintf("bucketfs %s (%s %s/%s)", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

const topUsage = `bucketfs mounts a Google Cloud Storage bucket as a directory, served from a
cache on local disk.

Usage:
  bucketfs mount BUCKET MOUNTPOINT [flags]   mount in the foreground; Ctrl-C or
                                             SIGTERM unmounts
  bucketfs mount --config FILE [flags]       the same, settings read from a YAML file
  bucketfs status MOUNTPOINT                 what a running mount is doing: cache,
                                             changes not yet uploaded, errors
  bucketfs flush MOUNTPOINT                  upload every change now and wait
  bucketfs warm PATH... [--pin]              fetch every file under PATH into the
                                             cache now (--pin: keep it there)
  bucketfs unpin PATH...                     end the pins under PATH
  bucketfs resolve MOUNTPOINT FILE --keep-local|--take-bucket
                                             end the hold on a file that failed
                                             its checksum check
  bucketfs fsck --cache-dir DIR [--rebuild]  check an unmounted cache; rebuild
                                             its index from the data files
  bucketfs version                           print the version

As a mount helper (/sbin/mount.fuse.bucketfs, for mount(8) and /etc/fstab):
  mount -t fuse.bucketfs -o OPTIONS BUCKET MOUNTPOINT
  fstab: BUCKET MOUNTPOINT fuse.bucketfs _netdev,OPTIONS 0 0
  OPTIONS are the mount flags by name, _ for - (cache_dir=DIR, anonymous, ...);
  the mount runs on in the background once mount(8) returns.

Run 'bucketfs mount --help' for the mount flags.
`
