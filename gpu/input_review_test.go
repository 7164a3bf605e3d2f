package gpu

import (
	"strings"
	"testing"
)

// A profile field of the wrong type was refused with YAML's own words,
// "line 2: cannot unmarshal !!str `24GiB` into int64", and a misspelt
// field with "field memory not found in type gpu.Profile": neither named
// the field nor what to write. Each names the field, what it takes, and
// (for an unknown field) the fields a profile has.
func TestParseProfilesTypeErrorsNameField(t *testing.T) {
	const rest = "peak_flops: {fp32: 1e12}\nmem_bandwidth: 1e11\nh2d_bandwidth: 1e10\nd2h_bandwidth: 1e10\n"
	for _, c := range []struct {
		yaml string
		want []string
	}{
		{"name: x\nmemory_bytes: 24GiB\n" + rest, []string{"line 2", "memory_bytes:", "whole number of bytes", `"24GiB"`}},
		{"name: x\nmemory_bytes: 1e30\n" + rest, []string{"line 2", "memory_bytes:", "whole number of bytes"}},
		{"name: x\nmemory_bytes: 1073741824\n" + strings.Replace(rest, "mem_bandwidth: 1e11", "mem_bandwidth: fast", 1),
			[]string{"line 4", "mem_bandwidth:", "number", "bytes/s", `"fast"`}},
		{"name: x\nmemory_bytes: 1073741824\n" + strings.Replace(rest, "{fp32: 1e12}", "{fp32: lots}", 1),
			[]string{"line 3", "peak_flops.fp32:", "FLOP/s"}},
		{"name: x\nmemory_bytes: 1073741824\n" + strings.Replace(rest, "{fp32: 1e12}", "1e12", 1),
			[]string{"line 3", "peak_flops:", "{fp32:"}},
		{"name: [x]\nmemory_bytes: 1073741824\n" + rest, []string{"line 1", "name:", "string"}},
		{"name: x\nmemory: 1073741824\n" + rest, []string{"line 2", `unknown field "memory"`, "memory_bytes", "launch_overhead"}},
		{"- name: x\n  memory_bytes: 1073741824\n  launch_overhead: 5us\n" + "  " + strings.ReplaceAll(strings.TrimSpace(rest), "\n", "\n  ") + "\n",
			[]string{"line 3", "launch_overhead:", "seconds", `"5us"`}},
	} {
		_, err := ParseProfiles([]byte(c.yaml))
		if err == nil {
			t.Errorf("%q: accepted", c.yaml)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q does not mention %s", c.yaml, err, w)
			}
		}
		if strings.Contains(err.Error(), "gpu.Profile") || strings.Contains(err.Error(), "!!") {
			t.Errorf("%q: error %q speaks of Go types or YAML tags", c.yaml, err)
		}
	}
}

// What the decoder took before is still taken: a whole float for
// memory_bytes, a number for a name, an empty value (judged by Validate),
// anchors and merge keys.
func TestParseProfilesShapeCheckKeepsValid(t *testing.T) {
	for _, y := range []string{
		"name: x\nmemory_bytes: 2.5e10\npeak_flops: {fp32: 1e12, int8: 4e12}\nmem_bandwidth: 1e11\nh2d_bandwidth: 1e10\nd2h_bandwidth: 1e10\nlaunch_overhead: 0\n",
		"name: 123\nmemory_bytes: 0x40000000\npeak_flops: {fp32: 1e12}\nmem_bandwidth: 100000000000\nh2d_bandwidth: 1e10\nd2h_bandwidth: 1e10\nlaunch_overhead:\nsource: a spec sheet\n",
		"- &a {name: a, memory_bytes: 1073741824, peak_flops: {fp32: 1e12}, mem_bandwidth: 1e11, h2d_bandwidth: 1e10, d2h_bandwidth: 1e10}\n- <<: *a\n  name: b\n  memory_bytes: 2147483648\n",
	} {
		if _, err := ParseProfiles([]byte(y)); err != nil {
			t.Errorf("%q: %v", y, err)
		}
	}
}
