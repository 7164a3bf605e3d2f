package transport

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// pflag takes a back-quoted word in a usage string as the flag's value
// name, so "`coordinator certs` writes one" made --help print
// "--gossip-key-file coordinator certs" as if that were the value to pass.
// Each security flag's value name in --help is one word.
func TestSecurityFlagsHelpValueNames(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	AddSecurityFlags(fs, &SecurityFlags{})
	fs.VisitAll(func(f *pflag.Flag) {
		name, usage := pflag.UnquoteUsage(f)
		if name != "string" {
			t.Errorf("--%s: --help shows the value as %q, want string (usage %q)", f.Name, name, usage)
		}
		if !strings.Contains(usage, "coordinator certs") && (f.Name == "tls-cert" || f.Name == "gossip-key-file") {
			t.Errorf("--%s: usage %q no longer says coordinator certs writes one", f.Name, usage)
		}
	})
}
