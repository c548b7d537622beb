package main

import (
	"flag"
	"fmt"

	bfs "github.com/bucketfs/bucketfs/fs"
)

// prefetchConfig is the settings of the prefetch of small files
// (fs/prefetch.go).
type prefetchConfig struct {
	on      bool
	files   int
	maxSize Size
	window  Size
}

func (p *prefetchConfig) addFlags(fl *flag.FlagSet) {
	p.maxSize = bfs.DefaultPrefetchMaxSize
	p.window = bfs.DefaultPrefetchWindow
	fl.BoolVar(&p.on, "prefetch", true, "when files of a directory are read one after another, fetch the next small ones before they are opened")
	fl.IntVar(&p.files, "prefetch-files", bfs.DefaultPrefetchFiles, "files fetched ahead per directory being read in order")
	fl.Var(&p.maxSize, "prefetch-max-size", "largest file fetched ahead")
	fl.Var(&p.window, "prefetch-window", "bytes fetched ahead per directory being read in order")
}

func (p *prefetchConfig) validate() error {
	switch {
	case p.files < 0 || p.files > 10000:
		return &usageError{fmt.Sprintf("--prefetch-files must be between 0 and 10000, got %d", p.files)}
	case p.maxSize < 0 || p.window < 0:
		return &usageError{"--prefetch-max-size and --prefetch-window must not be negative"}
	}
	return nil
}

// options are the file system's prefetch bounds: at most half of the
// requests in flight (--max-requests), so that opens find room.
func (p *prefetchConfig) options(maxRequests int) bfs.PrefetchOptions {
	if !p.on {
		return bfs.PrefetchOptions{}
	}
	return bfs.PrefetchOptions{
		Files:    p.files,
		MaxSize:  int64(p.maxSize),
		Window:   int64(p.window),
		Parallel: max(1, min(bfs.DefaultPrefetchParallel, maxRequests/2)),
	}
}
