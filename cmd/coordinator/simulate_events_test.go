package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/placement"
)

// readCSV reads a CSV file written under --out.
func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// simulate --out writes events.csv: under fifo, each job of three starts
// and completes once, at the times sim.csv gives, on the GPUs it asked
// for; the bound, which schedules nothing, writes none and removes an
// earlier run's.
func TestSimulateEventsCSV(t *testing.T) {
	w := writeWorkload(t, "a,0,mlp,2,128", "b,0,mlp,1,128", "c,30,mlp,1,128")
	out := filepath.Join(t.TempDir(), "out")
	if _, _, err := runCoordinator(t, "simulate", "--workload", w, "--policy", "fifo", "--gpus", "2", "--gpus-per-node", "2", "--out", out); err != nil {
		t.Fatal(err)
	}
	evs := readCSV(t, filepath.Join(out, "events.csv"))
	if !reflect.DeepEqual(evs[0], eventsHeader) {
		t.Fatalf("header %v, want %v", evs[0], eventsHeader)
	}
	jobs := readCSV(t, filepath.Join(out, "sim.csv"))
	col := func(header []string, name string) int {
		for i, h := range header {
			if h == name {
				return i
			}
		}
		t.Fatalf("no column %q in %v", name, header)
		return -1
	}
	start, done := map[string]string{}, map[string]string{}
	for _, r := range jobs[1:] {
		start[r[0]], done[r[0]] = r[col(jobs[0], "start_s")], r[col(jobs[0], "completion_s")]
	}
	want := map[string]string{"a": "2", "b": "1", "c": "1"}
	seen := map[string]int{}
	for _, r := range evs[1:] {
		job, kind := r[1], r[3]
		seen[job+" "+kind]++
		switch kind {
		case "start":
			if r[0] != start[job] || r[4] != "0" || r[5] != want[job] || r[11] != "0.0000" {
				t.Errorf("start row %v: want t=%s, 0 → %s GPUs, progress 0", r, start[job], want[job])
			}
		case "complete":
			if r[0] != done[job] || r[4] != want[job] || r[5] != "0" || r[11] != "1.0000" {
				t.Errorf("complete row %v: want t=%s, %s → 0 GPUs, progress 1", r, done[job], want[job])
			}
		default:
			t.Errorf("row %v: fifo neither resizes nor preempts", r)
		}
	}
	for job := range want {
		if seen[job+" start"] != 1 || seen[job+" complete"] != 1 {
			t.Errorf("%s: %d start and %d complete rows, want one each", job, seen[job+" start"], seen[job+" complete"])
		}
	}
	if len(evs) != 7 {
		t.Errorf("%d rows, want a header and 6", len(evs))
	}
	// Two rows whole, column by column: a starts at 0 on both GPUs of the
	// node at 64 samples each (128 asked); b completes on one GPU at 128.
	rows := map[string][]string{}
	for _, r := range evs[1:] {
		rows[r[1]+" "+r[3]] = r
	}
	for key, want := range map[string][]string{
		"a start":    {"0.0", "a", "mlp", "start", "0", "2", "2", "1", "128", "64", "0", "0.0000"},
		"b complete": {done["b"], "b", "mlp", "complete", "1", "0", "", "0", "128", "128", "0", "1.0000"},
	} {
		if !reflect.DeepEqual(rows[key], want) {
			t.Errorf("%s row %v, want %v", key, rows[key], want)
		}
	}

	// A bound run into the same directory removes the schedule there,
	// which is fifo's, not its own.
	if _, _, err := runCoordinator(t, "simulate", "--workload", w, "--policy", "bound", "--out", out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "events.csv")); !os.IsNotExist(err) {
		t.Errorf("a bound run left the earlier events.csv in place (stat: %v)", err)
	}

	bound := filepath.Join(t.TempDir(), "bound")
	if _, _, err := runCoordinator(t, "simulate", "--workload", w, "--policy", "bound", "--out", bound); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bound, "events.csv")); !os.IsNotExist(err) {
		t.Errorf("the bound wrote events.csv (stat: %v)", err)
	}
}

// events.csv's header is SimEvent's JSON keys in field order, so the CSV
// and a JSON encoding of the events name each field alike.
func TestEventsHeaderIsSimEventJSON(t *testing.T) {
	typ := reflect.TypeOf(placement.SimEvent{})
	var keys []string
	for i := 0; i < typ.NumField(); i++ {
		keys = append(keys, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
	}
	if !reflect.DeepEqual(keys, eventsHeader) {
		t.Errorf("SimEvent's JSON keys %v, events.csv's header %v", keys, eventsHeader)
	}
}
