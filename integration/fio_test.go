package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

// fioReport is the part of fio's --output-format=json that the benchmark
// reads. fio writes one object; numbers it prints as integers decode into
// float64 fields just as well.
type fioReport struct {
	Version string   `json:"fio version"`
	Jobs    []fioJob `json:"jobs"`
}

type fioJob struct {
	Name  string `json:"jobname"`
	Error int    `json:"error"`
	Read  fioIO  `json:"read"`
	Write fioIO  `json:"write"`
}

// fioIO is one direction of a job. Runtime is in milliseconds.
type fioIO struct {
	IOBytes int64   `json:"io_bytes"`
	BWBytes float64 `json:"bw_bytes"`
	IOPS    float64 `json:"iops"`
	Runtime int64   `json:"runtime"`
	Clat    struct {
		Mean       float64            `json:"mean"`
		Percentile map[string]float64 `json:"percentile"`
	} `json:"clat_ns"`
}

// MiBps is the bandwidth in MiB/s.
func (r fioIO) MiBps() float64 { return r.BWBytes / (1 << 20) }

// P99 is the 99th percentile completion latency, or 0 if fio did not
// report it.
func (r fioIO) P99() float64 { return r.Clat.Percentile["99.000000"] }

// parseFio reads the single job of a fio JSON report. fio may print
// warnings ("fio: ...") on stdout before the JSON; they are skipped. A job
// that reports an error or moved no data (read nothing and wrote nothing)
// is an error; whether it moved data in the direction that was meant is
// for the caller to check.
func parseFio(out []byte) (fioJob, error) {
	rep, err := parseFioReport(out)
	if err != nil {
		return fioJob{}, err
	}
	if len(rep.Jobs) != 1 {
		return fioJob{}, fmt.Errorf("fio report has %d jobs, want 1", len(rep.Jobs))
	}
	j := rep.Jobs[0]
	if j.Error != 0 {
		return j, fmt.Errorf("fio job %q failed with error %d", j.Name, j.Error)
	}
	if j.Read.IOBytes <= 0 && j.Write.IOBytes <= 0 {
		return j, fmt.Errorf("fio job %q read and wrote nothing", j.Name)
	}
	return j, nil
}

// parseFioAll reads a report of several jobs and returns the bytes they
// read in all and the sum of their read bandwidths (bytes/s, each over
// its own runtime: what fio reports for a group), or the error of a job
// that failed.
func parseFioAll(out []byte) (n int64, bw float64, _ error) {
	rep, err := parseFioReport(out)
	if err != nil {
		return 0, 0, err
	}
	for _, j := range rep.Jobs {
		if j.Error != 0 {
			return 0, 0, fmt.Errorf("fio job %q failed with error %d", j.Name, j.Error)
		}
		n += j.Read.IOBytes
		bw += j.Read.BWBytes
	}
	return n, bw, nil
}

// parseFioReport decodes fio's JSON report, which may follow warnings.
func parseFioReport(out []byte) (fioReport, error) {
	i := bytes.IndexByte(out, '{')
	if i < 0 {
		return fioReport{}, errors.New("fio printed no JSON report")
	}
	var rep fioReport
	dec := json.NewDecoder(bytes.NewReader(out[i:]))
	if err := dec.Decode(&rep); err != nil {
		return fioReport{}, fmt.Errorf("parsing fio's JSON report: %w", err)
	}
	return rep, nil
}

func TestParseFio(t *testing.T) {
	// A trimmed report in fio 3.x's layout, with a warning line before it.
	out := []byte(`fio: file hash not empty on exit
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "randread",
      "error" : 0,
      "read" : {
        "io_bytes" : 8589934592,
        "bw_bytes" : 572662306,
        "iops" : 139810.133333,
        "runtime" : 15000,
        "clat_ns" : {
          "mean" : 114000.5,
          "percentile" : { "50.000000" : 98304, "99.000000" : 250880 }
        }
      },
      "write" : { "io_bytes" : 0, "bw_bytes" : 0, "iops" : 0.0, "runtime" : 0 }
    }
  ]
}
`)
	j, err := parseFio(out)
	if err != nil {
		t.Fatal(err)
	}
	if j.Name != "randread" || j.Read.IOBytes != 8<<30 || j.Read.Runtime != 15000 {
		t.Errorf("parsed %+v", j)
	}
	if int(j.Read.IOPS) != 139810 || int(j.Read.MiBps()) != 546 || j.Read.P99() != 250880 {
		t.Errorf("iops %v, MiB/s %v, p99 %v", j.Read.IOPS, j.Read.MiBps(), j.Read.P99())
	}

	// A write job: the numbers are under "write".
	w, err := parseFio([]byte(`{"fio version": "fio-3.33", "jobs": [{"jobname": "randwrite", "error": 0,
	  "read": {"io_bytes": 0, "bw_bytes": 0, "iops": 0.0, "runtime": 0},
	  "write": {"io_bytes": 2147483648, "bw_bytes": 143165576, "iops": 34952.5, "runtime": 15000,
	    "clat_ns": {"mean": 450000.0, "percentile": {"99.000000": 1204224}}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if w.Write.IOBytes != 2<<30 || int(w.Write.IOPS) != 34952 || int(w.Write.MiBps()) != 136 || w.Write.P99() != 1204224 || w.Read.IOBytes != 0 {
		t.Errorf("parsed write job %+v", w)
	}

	for name, bad := range map[string]string{
		"no json":    "fio: failed to open file\n",
		"truncated":  `{"jobs": [`,
		"no jobs":    `{"jobs": []}`,
		"job error":  `{"jobs": [{"jobname": "x", "error": 5, "read": {"io_bytes": 4096}}]}`,
		"empty read": `{"jobs": [{"jobname": "x", "error": 0, "read": {"io_bytes": 0}}]}`,
		"no io":      `{"jobs": [{"jobname": "x", "error": 0, "read": {"io_bytes": 0}, "write": {"io_bytes": 0}}]}`,
		"write err":  `{"jobs": [{"jobname": "x", "error": 28, "write": {"io_bytes": 4096}}]}`,
	} {
		if _, err := parseFio([]byte(bad)); err == nil {
			t.Errorf("%s: parseFio accepted %q", name, bad)
		}
	}
}
