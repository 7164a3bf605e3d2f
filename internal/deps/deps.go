// Package deps pins the project's third-party modules in go.mod while the
// packages that use them are being written, so parallel work never races on
// go.mod. It is imported by nothing and compiles to nothing useful.
package deps

import (
	_ "github.com/NVIDIA/go-nvml/pkg/nvml"
	_ "github.com/asynkron/protoactor-go/actor"
	_ "github.com/asynkron/protoactor-go/remote"
	_ "github.com/hashicorp/memberlist"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/spf13/cobra"
	_ "gonum.org/v1/plot"
	_ "gonum.org/v1/plot/plotter"
	_ "gonum.org/v1/plot/vg"
	_ "google.golang.org/protobuf/proto"
	_ "gopkg.in/yaml.v3"
)
