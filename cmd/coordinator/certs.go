package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched/transport"
)

func init() {
	var out, hosts string
	c := &cobra.Command{
		Use:   "certs --out DIR --hosts IP,IP,NAME",
		Short: "Write a CA, a certificate and key for mutual TLS, and a gossip key, to try serve's and node's security flags",
		Long: `Write, into --out (created if need be; existing files are never overwritten):

  ca.pem      a new CA certificate (ECDSA P-256, 1 year)          --tls-ca
  cert.pem    a certificate signed by it, for server and client   --tls-cert
  key.pem     its private key (mode 0600)                          --tls-key
  gossip.key  a random 32-byte gossip key, base64 (mode 0600)      --gossip-key-file

The certificate's SANs are --hosts: every IP address or DNS name a process is
dialled at (its --advertise IP, or its --listen host), since peers verify the
certificate against the host of the address they dial. Give the same four
files to the coordinator and every node. The CA's private key is not kept: to
add a host, run certs again with every host and hand out the new files.`,
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
			f, err := transport.WriteCerts(out, list)
			if err != nil {
				return fmt.Errorf("certs: %w", err)
			}
			fmt.Fprintf(os.Stderr, "wrote %s, %s, %s and %s\nuse: --tls-cert %s --tls-key %s --tls-ca %s --gossip-key-file %s\n",
				f.CA, f.Cert, f.Key, f.GossipKey, f.Cert, f.Key, f.CA, f.GossipKey)
			return nil
		},
	}
	c.Flags().StringVar(&out, "out", "", "directory to write ca.pem, cert.pem, key.pem and gossip.key to")
	c.Flags().StringVar(&hosts, "hosts", "", "comma-separated IP addresses and DNS names the processes are dialled at, e.g. 127.0.0.1,10.0.0.5,node1.lab")
	rootCmd.AddCommand(c)
}
