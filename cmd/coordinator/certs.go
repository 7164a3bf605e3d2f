package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched/transport"
)

func init() {
	var out, hosts, caDir string
	var keepCAKey bool
	c := &cobra.Command{
		Use:   "certs --out DIR --hosts IP,IP,NAME [--keep-ca-key | --ca CADIR]",
		Short: "Write a CA, a certificate and key for mutual TLS, and a gossip key, for serve's and node's security flags",
		Long: `Write, into --out (created if need be; existing files are never overwritten):

  ca.pem      a new CA certificate (ECDSA P-256, 1 year)          --tls-ca
  cert.pem    a certificate signed by it, for server and client   --tls-cert
  key.pem     its private key (mode 0600)                          --tls-key
  gossip.key  a random 32-byte gossip key, base64 (mode 0600)      --gossip-key-file

The certificate's SANs are --hosts: every IP address or DNS name a process is
dialled at (its --advertise IP, or its --listen host), since peers verify the
certificate against the host of the address they dial.

One certificate for every host: give the same four files to the coordinator
and every node. The CA's private key is not kept, so to add a host, run certs
again with every host and hand out the new files.

A certificate per host: run certs once with --keep-ca-key (it also writes
ca-key.pem, mode 0600; whoever holds it can issue certificates the cluster
trusts, so keep that directory off the cluster's machines), then for each host
  certs --ca CADIR --hosts HOST --out HOSTDIR
which signs a new cert.pem and key.pem with CADIR's CA and copies ca.pem and
gossip.key into HOSTDIR. A host added later needs only its own run.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("certs: --out is required: the directory to write the files to")
			}
			var list []string
			if hosts != "" {
				for _, h := range strings.Split(hosts, ",") {
					list = append(list, strings.TrimSpace(h))
				}
			}
			f, err := transport.WriteCerts(out, list, transport.CertOptions{KeepCAKey: keepCAKey, CADir: caDir})
			if err != nil {
				return fmt.Errorf("certs: %w", err)
			}
			wrote := []string{f.CA, f.Cert, f.Key}
			use := fmt.Sprintf("--tls-cert %s --tls-key %s --tls-ca %s", f.Cert, f.Key, f.CA)
			if f.GossipKey != "" {
				wrote = append(wrote, f.GossipKey)
				use += " --gossip-key-file " + f.GossipKey
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\nuse: %s\n", strings.Join(wrote, ", "), use)
			if keepCAKey {
				fmt.Fprintf(cmd.ErrOrStderr(), "kept the CA's key in %s: keep it off the cluster's machines; issue a host's files with: certs --ca %s --hosts HOST --out DIR\n",
					filepath.Join(out, transport.CAKeyFile), out)
			}
			if caDir != "" && f.GossipKey == "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s has no %s: give this host the gossip key the others use\n", caDir, transport.GossipKeyFile)
			}
			return nil
		},
	}
	c.Flags().StringVar(&out, "out", "", "directory to write ca.pem, cert.pem, key.pem and gossip.key to")
	c.Flags().StringVar(&hosts, "hosts", "", "comma-separated IP addresses and DNS names the processes are dialled at, e.g. 127.0.0.1,10.0.0.5,node1.lab")
	c.Flags().BoolVar(&keepCAKey, "keep-ca-key", false, "also write the new CA's private key (ca-key.pem), to issue per-host certificates later with --ca")
	c.Flags().StringVar(&caDir, "ca", "", "issue from the CA in this directory (ca.pem and ca-key.pem, from an earlier certs --keep-ca-key) instead of a new CA")
	rootCmd.AddCommand(c)
}
