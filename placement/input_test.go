package placement

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

// Progress in a validation file is cumulative (progress at the end of each
// epoch). A row whose progress is below the row before it made the
// simulator move a job's progress, and its clock, backwards; it is refused
// with the file, line and field named.
func TestLoadAppRejectsDecreasingProgress(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"placements.csv":   "placement,local_bsz,step_time,sync_time\n1,4,0.5,0.0\n",
		"validation-4.csv": "progress,iteration,metric,grad_sqr,grad_var\n100,100,0.5,1,1\n10,200,0.5,1,1\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := LoadApp(dir)
	if err == nil || !strings.Contains(err.Error(), "validation-4.csv:3: field progress") {
		t.Fatalf("error %v, want it to name validation-4.csv:3: field progress", err)
	}
}

// FuzzLoadWorkload: a workload CSV never panics the loader, and every job
// it accepts has a name used once, a finite arrival time ≥ 0, and a GPU
// count and batch size ≥ 1.
func FuzzLoadWorkload(f *testing.F) {
	const head = "name,time,application,num_replicas,batch_size\n"
	for _, s := range []string{
		head + "a,0,const,1,1\nb,10.5,const,2,8\n",
		head + "a,0,mlp,1,1\n",
		head + "a,NaN,const,1,1\n",
		head + "a,1e400,const,1,1\n",
		head + "\"a,0,const,1,1\n",
		head + "a,0,const,1\n",
		"time,name,batch_size,application,num_replicas,extra\n3,x,4,const,2,y\n",
		head + "\n\na,0,const,+1,0x10\n",
	} {
		f.Add([]byte(s))
	}
	apps := Apps{"const": constApp("const", 1, 100)}
	path := filepath.Join(f.TempDir(), "w.csv")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		jobs, err := LoadWorkload(path, apps)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if len(jobs) == 0 {
			t.Fatal("accepted a workload with no jobs")
		}
		seen := map[string]bool{}
		for _, j := range jobs {
			if j.Name == "" || seen[j.Name] || !(j.Time >= 0) || j.Time > 1e308 || j.Replicas < 1 || j.Replicas > workload.MaxGPUs || j.Batch < 1 || j.Batch > workload.MaxBatch {
				t.Fatalf("accepted job %+v", j)
			}
			seen[j.Name] = true
			if _, ok := apps[j.App]; !ok {
				if c, ok := zoo.Canonical(j.App); !ok || c != j.App {
					t.Fatalf("job %+v: application neither measured nor a zoo model's canonical name", j)
				}
			}
		}
	})
}

// FuzzLoadApp: an application profile's validation file never panics the
// loader, and an accepted profile gives finite, non-negative step times,
// gains and iteration counts.
func FuzzLoadApp(f *testing.F) {
	const place = "placement,local_bsz,step_time,sync_time\n1,4,0.5,0.0\n2,4,0.6,0.1\n"
	for _, s := range []string{
		"progress,iteration,metric,grad_sqr,grad_var\n10,10,0.5,1,1\n",
		"progress,iteration,metric,grad_sqr,grad_var\n10,10,0.5,1,1\n20,25,0.6,2,0.5\n",
		"progress,iteration,metric,grad_sqr,grad_var\n0,0,0,0,0\n",
		"progress,iteration,metric,grad_sqr,grad_var\n10,10,0.5,1,-1\n",
		"iteration,progress,grad_var,grad_sqr,metric\n5,5,1,1,x\n",
	} {
		f.Add([]byte(place), []byte(s))
	}
	dir := filepath.Join(f.TempDir(), "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, placements, validation []byte) {
		if err := os.WriteFile(filepath.Join(dir, "placements.csv"), placements, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "validation-4.csv"), validation, 0o644); err != nil {
			t.Fatal(err)
		}
		a, err := LoadApp(dir)
		if err != nil {
			return
		}
		for _, counts := range [][]int{{1}, {2}, {1, 1}, {4, 4, 4}} {
			for _, l := range []float64{1, 4, 1000} {
				step, sync := a.StepTime(counts, l)
				if !(step > 0) || !(sync >= 0) || sync > step || math.IsInf(step, 0) {
					t.Fatalf("StepTime(%v, %v) = %v, %v", counts, l, step, sync)
				}
			}
		}
		for _, b := range []float64{1, 4, 64} {
			for e := 0; e < a.Epochs; e++ {
				if g := a.Gain(b, e); !(g >= 0) || math.IsInf(g, 0) {
					t.Fatalf("Gain(%v, %d) = %v", b, e, g)
				}
			}
			if it := a.Iterations(b); !(it >= 0) || math.IsInf(it, 0) {
				t.Fatalf("Iterations(%v) = %v", b, it)
			}
		}
		if tg := a.Target(); !(tg >= 0) || math.IsInf(tg, 0) {
			t.Fatalf("Target() = %v", tg)
		}
	})
}

// A workload's batch size is bounded as a job spec's is: a batch_size of 9e18 was accepted, overflowed the policy's batch split,
// and the job never ran ("1 of 1 jobs still running after 2592000 virtual
// seconds (policy fifo starves them?)").
func TestWorkloadBatchBounded(t *testing.T) {
	apps := Apps{"const": constApp("const", 1, 100)}
	dir := t.TempDir()
	for i, c := range []struct{ row, want string }{
		{"a,0,const,1,9000000000000000000", ":2: field batch_size: 9000000000000000000 is more than 1048576"},
	} {
		p := filepath.Join(dir, "w"+string(rune('a'+i))+".csv")
		if err := os.WriteFile(p, []byte("name,time,application,num_replicas,batch_size\n"+c.row+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadWorkload(p, apps); err == nil || !strings.Contains(err.Error(), p+c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.row, err, p+c.want)
		}
	}
}

// A job arriving after the default 30-day limit was reported as starved by
// the policy ("still running after 2592000 virtual seconds"), though it had
// not arrived; the default limit runs from the last arrival.
func TestSimulateLateArrival(t *testing.T) {
	apps := Apps{"const": constApp("const", 1, 100)}
	w := []WorkloadJob{{Name: "early", Time: 0, App: "const", Replicas: 1, Batch: 1},
		{Name: "late", Time: 40 * 86400, App: "const", Replicas: 1, Batch: 1}}
	pol, err := NewPolicy("fifo", PolicyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Simulate(apps, w, pol, SimConfig{Nodes: 1, GPUsPerNode: 1, Interval: 60, MoveCost: 30})
	if err != nil {
		t.Fatal(err)
	}
	if got := jctByName(r)["late"]; got != 130 {
		t.Errorf("late job: JCT %v, want 130 (30 s restart, 100 iterations of 1 s)", got)
	}
}

// A CSV saved with a UTF-8 byte-order mark (as spreadsheet programs write
// it) was refused with `missing column "name"` though its header plainly
// has one: the mark stuck to the first column's name. The mark is skipped.
func TestWorkloadWithByteOrderMark(t *testing.T) {
	apps := Apps{"const": constApp("const", 1, 100)}
	p := filepath.Join(t.TempDir(), "w.csv")
	body := "\ufeffname,time,application,num_replicas,batch_size\r\na,0,const,1,1\r\nb,5,const,2,4\r\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	jobs, err := LoadWorkload(p, apps)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].Name != "a" || jobs[1].Name != "b" || jobs[1].Replicas != 2 || jobs[1].Batch != 4 {
		t.Fatalf("jobs %+v", jobs)
	}
}

// A header naming a column twice was accepted and the later column's
// values used, so "name,time,...,batch_size,time" ran every job at the
// second time column's value with no word about the first. The header is
// refused, naming the column and both positions.
func TestCSVRefusesRepeatedColumn(t *testing.T) {
	apps := Apps{"const": constApp("const", 1, 100)}
	p := filepath.Join(t.TempDir(), "w.csv")
	body := "name,time,application,num_replicas,batch_size, time\na,0,const,1,1,5\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	jobs, err := LoadWorkload(p, apps)
	want := p + `:1: column "time" appears twice (columns 2 and 6)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("jobs %+v, error %v; want it to contain %q", jobs, err, want)
	}
}

// A count in an application profile too large for an int (a local_bsz of
// 1e300) passed the whole-number checks and overflowed in the conversion:
// the profile loaded with a per-GPU batch range of -9223372036854775808 to
// 0. Counts are bounded like a job spec's batch size and GPU count.
func TestLoadAppRefusesHugeCounts(t *testing.T) {
	const (
		place = "placement,local_bsz,step_time,sync_time\n1,4,0.5,0.0\n"
		val   = "progress,iteration,metric,grad_sqr,grad_var\n10,10,0.5,1,1\n"
		scale = "num_nodes,num_replicas,local_bsz,step_time,sync_time\n"
	)
	for _, c := range []struct{ file, body, want string }{
		{"placements.csv", "placement,local_bsz,step_time,sync_time\n1,1e300,0.5,0.0\n", "placements.csv:2: field local_bsz"},
		{"placements.csv", place + "2,2097152,0.5,0.0\n", "placements.csv:3: field local_bsz"},
		{"scalability.csv", scale + "1e300,1e300,4,0.5,0.0\n", "scalability.csv:2: field num_nodes"},
		{"scalability.csv", scale + "1,1e300,4,0.5,0.0\n", "scalability.csv:2: field num_replicas"},
		{"scalability.csv", scale + "2,4,1e300,0.5,0.0\n", "scalability.csv:2: field local_bsz"},
	} {
		dir := filepath.Join(t.TempDir(), "app")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		files := map[string]string{"placements.csv": place, "validation-4.csv": val}
		files[c.file] = c.body
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		a, err := LoadApp(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			got := ""
			if a != nil {
				got = fmt.Sprintf(" (per-GPU batch %d–%d)", a.MinLocal, a.MaxLocal)
			}
			t.Errorf("%s: error %v%s; want it to name %s", c.body, err, got, c.want)
		}
	}
}

// A workload's GPU count is bounded as a job spec's is (workload.MaxGPUs):
// num_replicas 9000000000000000000 was accepted and the simulator quietly
// ran the job on whatever the cluster had.
func TestWorkloadReplicasBounded(t *testing.T) {
	apps := Apps{"const": constApp("const", 1, 100)}
	p := filepath.Join(t.TempDir(), "w.csv")
	if err := os.WriteFile(p, []byte("name,time,application,num_replicas,batch_size\na,0,const,16384,1\nb,0,const,9000000000000000000,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	jobs, err := LoadWorkload(p, apps)
	want := p + ":3: field num_replicas: 9000000000000000000 is more than 16384"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("jobs %+v, error %v; want it to contain %q", jobs, err, want)
	}
}

// Go's float syntax is wider than a CSV number's: "1_0" (digit separators)
// loaded as 10 and "0x1p4" (a hexadecimal float) as 16, so a typo in a time
// or a step time ran silently with another value. Both are refused, naming
// the file, line and field.
func TestCSVNumbersAreDecimal(t *testing.T) {
	apps := Apps{"const": constApp("const", 1, 100)}
	for _, c := range []struct{ body, want string }{
		{"name,time,application,num_replicas,batch_size\na,1_0,const,1,1\n", "w.csv:2: field time"},
		{"name,time,application,num_replicas,batch_size\na,0x1p4,const,1,1\n", "w.csv:2: field time"},
	} {
		p := filepath.Join(t.TempDir(), "w.csv")
		if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		jobs, err := LoadWorkload(p, apps)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, jobs %+v; want an error naming %s", c.body, err, jobs, c.want)
		}
	}
	for _, c := range []struct{ file, body, want string }{
		{"placements.csv", "placement,local_bsz,step_time,sync_time\n1,4,0_5,0.0\n", "placements.csv:2: field step_time"},
		{"validation-4.csv", "progress,iteration,metric,grad_sqr,grad_var\n1_0,10,0.5,1,1\n", "validation-4.csv:2: field progress"},
		{"validation-4.csv", "progress,iteration,metric,grad_sqr,grad_var\n10,0x10p0,0.5,1,1\n", "validation-4.csv:2: field iteration"},
	} {
		dir := filepath.Join(t.TempDir(), "app")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		files := map[string]string{"placements.csv": "placement,local_bsz,step_time,sync_time\n1,4,0.5,0.0\n",
			"validation-4.csv": "progress,iteration,metric,grad_sqr,grad_var\n10,10,0.5,1,1\n"}
		files[c.file] = c.body
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := LoadApp(dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: error %v; want one naming %s", c.file, c.body, err, c.want)
		}
	}
}

// validation-4.csv and validation-04.csv both name global batch 4; both
// loaded, as two profiles of one batch size, and which one a lookup found
// depended on the order of the file names. The second is refused, naming
// both files.
func TestLoadAppRefusesTwoValidationFilesForOneBatch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	val := "progress,iteration,metric,grad_sqr,grad_var\n10,10,0.5,1,1\n"
	for name, body := range map[string]string{"placements.csv": "placement,local_bsz,step_time,sync_time\n1,4,0.5,0.0\n",
		"validation-4.csv": val, "validation-04.csv": val} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := LoadApp(dir)
	if err == nil || !strings.Contains(err.Error(), "validation-04.csv") || !strings.Contains(err.Error(), "validation-4.csv") {
		t.Fatalf("error %v; want one naming validation-04.csv and validation-4.csv", err)
	}
}

// A job arriving absurdly late (a time of 1e15 s, some 30 million years:
// a column in milliseconds since the epoch, or a typo) was accepted, and
// the simulator stepped through every empty interval up to it, recording
// each in its timeline: simulate ran for hours and gigabytes of memory.
// It is refused at once, naming the job, its time and the fix.
func TestSimulateRefusesFarArrival(t *testing.T) {
	apps := Apps{"const": constApp("const", 1, 100)}
	w := []WorkloadJob{{Name: "early", Time: 0, App: "const", Replicas: 1, Batch: 1},
		{Name: "far", Time: 1e15, App: "const", Replicas: 1, Batch: 1}}
	pol, err := NewPolicy("fifo", PolicyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Simulate(apps, w, pol, SimConfig{Nodes: 1, GPUsPerNode: 1, Interval: 60, MoveCost: 30})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{`job "far"`, "1e+15", "interval"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// An empty workload file was refused with "cannot read header: EOF",
// which names neither the problem nor the fix; it says the file is empty
// and which header it needs.
func TestWorkloadEmptyFileNamesHeader(t *testing.T) {
	p := filepath.Join(t.TempDir(), "w.csv")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadWorkload(p, nil)
	if err == nil || !strings.Contains(err.Error(), "empty") || !strings.Contains(err.Error(), "name,time,application,num_replicas,batch_size") {
		t.Errorf("error %v, want it to say the file is empty and name the header", err)
	}
}

// A folder in --apps that is not an application profile is named as such,
// with what an application folder holds: before, the error was the bare
// "open DIR/foo/placements.csv: no such file or directory".
func TestLoadAppsNamesNonApplicationFolder(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "foo"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := LoadApps(dir)
	for _, w := range []string{"application profiles", filepath.Join(dir, "foo"), "placements.csv", "--apps"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("LoadApps of a folder with a non-application subfolder: %v, want it to contain %q", err, w)
		}
	}
}
