package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The mount helper lets mount(8) and /etc/fstab mount buckets:
//
//	my-bucket  /mnt/data  fuse.bucketfs  _netdev,cache_dir=/var/cache/bucketfs/my-bucket  0 0
//
// mount(8) runs /sbin/mount.fuse.bucketfs SOURCE MOUNTPOINT [-sfnv] [-o OPTIONS]
// (a symlink to bucketfs), or, without that symlink, mount.fuse3 runs
// "bucketfs SOURCE MOUNTPOINT -o OPTIONS" from the default PATH. Either way
// mount(8) expects the helper to return once the file system is mounted,
// and the file system to be served on afterwards. So the helper:
//
//  1. maps the options to mount flags (below) and checks them, and the
//     --config file they may name, before anything starts;
//  2. starts 'bucketfs mount' in a session of its own (no terminal, stdin
//     and stdout on /dev/null, stderr on the log: the journal when mount
//     runs under systemd, else log_file=PATH or CACHE_DIR/bucketfs.log,
//     never the helper's own stderr, which the caller of mount may be
//     reading to its end), with a pipe on which the mount reports "ready"
//     or "error: MESSAGE" (notify.go);
//  3. waits for that line, then exits 0 ("ready": the mount is live and
//     the daemon runs on) or prints the error and exits 32, mount(8)'s
//     "mount failure" (the daemon has exited). A signal to the helper while
//     it waits stops the daemon.
//
// Options: every mount flag, by its name with _ or - (cache_dir=/x,
// cache_max_size=50GiB, anonymous, config=/etc/bucketfs/data.yaml); a bool
// flag alone means true. ro and rw set --read-only, noexec --noexec,
// log_file=PATH is where the daemon logs. Options of mount(8), systemd and
// the kernel that mean nothing to bucketfs are accepted and ignored (see
// ignoredOptions). Anything else is an error, unless -s (sloppy) is given.

// Exit codes of mount helpers, as mount(8) documents them.
const (
	helperExitUsage   = 1  // incorrect invocation
	helperExitFailure = 32 // mount failure
)

// ignoredOptions are generic mount options that bucketfs accepts and does
// not act on: mount(8)'s and systemd's own (auto, _netdev, nofail, x-...),
// and kernel options that a FUSE mount of bucketfs always has (nosuid,
// nodev, default_permissions) or that do not apply to it.
var ignoredOptions = map[string]bool{
	"defaults": true, "auto": true, "noauto": true, "user": true, "nouser": true, "users": true,
	"owner": true, "group": true, "_netdev": true, "nofail": true, "comment": true,
	"nosuid": true, "suid": true, "nodev": true, "dev": true, "exec": true, "async": true,
	"atime": true, "noatime": true, "diratime": true, "nodiratime": true, "relatime": true,
	"norelatime": true, "strictatime": true, "nostrictatime": true, "lazytime": true, "nolazytime": true,
	"silent": true, "loud": true, "default_permissions": true,
}

// pathFlags are the flags whose relative paths the helper makes absolute.
var pathFlags = map[string]bool{"cache-dir": true, "config": true}

// isHelperCall tells whether bucketfs was started as a mount helper: by the
// name mount.fuse.bucketfs (or mount.bucketfs), or by mount.fuse3 as
// "bucketfs SOURCE /MOUNTPOINT ...".
func isHelperCall(argv0 string, args []string) bool {
	if strings.HasPrefix(filepath.Base(argv0), "mount.") {
		return true
	}
	if len(args) < 2 || strings.HasPrefix(args[0], "-") || !filepath.IsAbs(args[1]) {
		return false
	}
	switch args[0] {
	case "mount", "status", "flush", "resolve", "fsck", "warm", "unpin", "version", "help": // the commands of run
		return false
	}
	return true
}

// helperCall is a parsed helper command line.
type helperCall struct {
	source, mountpoint string
	options            []string
	sloppy, fake       bool // -s: ignore unknown options; -f: check only, do not mount
	verbose            bool // -v
}

func parseHelperArgs(args []string) (*helperCall, error) {
	h := &helperCall{}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" || a == "-t" || a == "-N":
			if i+1 == len(args) {
				return nil, fmt.Errorf("%s needs a value", a)
			}
			i++
			if a == "-o" {
				h.options = append(h.options, splitOptions(args[i])...)
			} else if a == "-N" {
				return nil, errors.New("-N (mount in another namespace) is not supported")
			}
		case strings.HasPrefix(a, "-o"):
			h.options = append(h.options, splitOptions(a[2:])...)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for _, c := range a[1:] {
				switch c {
				case 's':
					h.sloppy = true
				case 'f':
					h.fake = true
				case 'v':
					h.verbose = true
				case 'n': // no mtab: bucketfs writes none
				default:
					return nil, fmt.Errorf("unknown flag -%c", c)
				}
			}
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		return nil, fmt.Errorf("usage: mount.fuse.bucketfs BUCKET MOUNTPOINT [-sfnv] [-o OPTIONS], got %d arguments", len(pos))
	}
	h.source, h.mountpoint = pos[0], pos[1]
	return h, nil
}

func splitOptions(s string) []string {
	var out []string
	for _, o := range strings.Split(s, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, o)
		}
	}
	return out
}

// mountArgs maps the options to the arguments of 'bucketfs mount', and
// returns log_file apart. warn is told about options ignored by -s.
func (h *helperCall) mountArgs(warn func(string)) (args []string, logFile string, err error) {
	fl := newMountFlags(&mountConfig{})
	for _, o := range h.options {
		name, val, hasVal := strings.Cut(o, "=")
		switch {
		case ignoredOptions[name] || strings.HasPrefix(name, "x-"):
			continue
		case name == "ro" || name == "rw":
			args = append(args, fmt.Sprintf("--read-only=%t", name == "ro"))
			continue
		case name == "log_file" || name == "log-file":
			if val == "" {
				return nil, "", fmt.Errorf("option %s needs a path (%s=/var/log/bucketfs.log)", name, name)
			}
			logFile, err = filepath.Abs(val)
			if err != nil {
				return nil, "", err
			}
			continue
		}
		f := fl.Lookup(strings.ReplaceAll(name, "_", "-"))
		if f == nil {
			if h.sloppy {
				warn(fmt.Sprintf("ignoring unknown option %q (-s)", name))
				continue
			}
			return nil, "", fmt.Errorf("unknown option %q: bucketfs takes its flag names as options (cache_dir=DIR, anonymous, ...; see 'bucketfs mount --help'), and the generic options ro, rw, noexec, _netdev, nofail, noauto, x-systemd.*", name)
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() && !hasVal {
			args = append(args, "--"+f.Name)
			continue
		}
		if !hasVal {
			return nil, "", fmt.Errorf("option %s needs a value (%s=%s)", name, name, strings.ToLower(valueKind(f)))
		}
		if pathFlags[f.Name] && val != "" {
			// The daemon runs in /, so as to hold no directory busy.
			if val, err = filepath.Abs(val); err != nil {
				return nil, "", err
			}
		}
		args = append(args, "--"+f.Name+"="+val)
	}
	return append(args, h.source, h.mountpoint), logFile, nil
}

// runHelper is the whole mount helper; it returns the exit code.
func runHelper(args []string) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "mount.fuse.bucketfs: "+format+"\n", a...)
		return code
	}
	h, err := parseHelperArgs(args)
	if err != nil {
		return fail(helperExitUsage, "%v", err)
	}
	mountArgs, logFile, err := h.mountArgs(func(s string) { fmt.Fprintln(os.Stderr, "mount.fuse.bucketfs:", s) })
	if err != nil {
		return fail(helperExitUsage, "%v", err)
	}
	c, err := parseMountArgs(mountArgs)
	if err != nil {
		return fail(helperExitUsage, "%s", redactString(err.Error()))
	}
	if h.verbose {
		fmt.Fprintf(os.Stderr, "mount.fuse.bucketfs: bucketfs mount %s\n", redactString(strings.Join(mountArgs, " ")))
	}
	if h.fake {
		return 0
	}

	logOut, logName, err := helperLog(logFile, c.cacheDir)
	if err != nil {
		return fail(helperExitFailure, "%v", err)
	}
	d, err := startDaemon(mountArgs, logOut)
	if logOut != os.Stderr {
		logOut.Close()
	}
	if err != nil {
		return fail(helperExitFailure, "starting bucketfs: %v", err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	select {
	case line := <-d.status:
		if line == "ready" {
			if h.verbose {
				fmt.Fprintf(os.Stderr, "mount.fuse.bucketfs: mounted gs://%s on %s (pid %d, log: %s)\n", c.bucket, c.mountpoint, d.cmd.Process.Pid, logName)
			}
			return 0 // the daemon runs on
		}
		waitErr := d.wait(30 * time.Second)
		if msg, ok := strings.CutPrefix(line, "error: "); ok {
			return fail(helperExitFailure, "%s", msg)
		}
		return fail(helperExitFailure, "bucketfs stopped before the mount was live (%v); see its log: %s", waitErr, logName)
	case s := <-sigs:
		d.cmd.Process.Signal(syscall.SIGTERM)
		d.wait(time.Minute)
		return fail(helperExitFailure, "interrupted by %v before the mount was live; bucketfs stopped", s)
	}
}

// daemonProc is a started 'bucketfs mount'.
type daemonProc struct {
	cmd    *exec.Cmd
	status chan string // its one status line, "" if it closed the pipe without one
}

// startDaemon starts 'bucketfs mount args' detached, logging to logOut.
func startDaemon(args []string, logOut *os.File) (*daemonProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	cmd := exec.Command(self, append([]string{"mount"}, args...)...)
	cmd.Dir = "/" // hold no directory busy
	cmd.Stderr = logOut
	cmd.ExtraFiles = []*os.File{w} // descriptor 3
	cmd.Env = append(daemonEnv(), statusFDEnv+"=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		return nil, err
	}
	d := &daemonProc{cmd: cmd, status: make(chan string, 1)}
	go func() {
		defer r.Close()
		line, _ := bufio.NewReader(r).ReadString('\n')
		d.status <- strings.TrimSpace(line)
	}()
	return d, nil
}

// wait waits for the daemon to exit, killing it after timeout.
func (d *daemonProc) wait(timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		d.cmd.Process.Kill()
		return fmt.Errorf("no exit within %v: killed (%v)", timeout, <-done)
	}
}

// daemonEnv is the helper's environment for the daemon: without systemd's
// notify socket (which belongs to whatever runs mount, not to the daemon)
// and with a PATH, which mount(8) does not pass on (fusermount3 is looked
// up in it).
func daemonEnv() []string {
	var env []string
	hasPath := false
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "NOTIFY_SOCKET", statusFDEnv:
			continue
		case "PATH":
			hasPath = true
		}
		env = append(env, kv)
	}
	if !hasPath {
		env = append(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	return env
}

// helperLog opens where the daemon logs: logFile if given, else the
// journal if the helper's stderr is the journal (mount run by systemd),
// else CACHE_DIR/bucketfs.log. It returns the file and its name.
func helperLog(logFile, cacheDir string) (*os.File, string, error) {
	if logFile == "" && stderrIsJournal() {
		return os.Stderr, "the journal", nil
	}
	if logFile == "" {
		logFile = filepath.Join(cacheDir, "bucketfs.log")
	}
	if err := os.MkdirAll(filepath.Dir(logFile), 0o700); err != nil {
		return nil, "", fmt.Errorf("log file: %w", err)
	}
	f, err := os.OpenFile(logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, "", fmt.Errorf("log file: %w", err)
	}
	return f, logFile, nil
}

// stderrIsJournal tells whether stderr is the stream systemd set up to the
// journal (JOURNAL_STREAM is "DEVICE:INODE" of it).
func stderrIsJournal() bool {
	dev, ino, ok := strings.Cut(os.Getenv("JOURNAL_STREAM"), ":")
	if !ok {
		return false
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(2, &st); err != nil {
		return false
	}
	return fmt.Sprint(st.Dev) == dev && fmt.Sprint(st.Ino) == ino
}
