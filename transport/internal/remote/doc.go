/*
Package remote provides access to actors across a network or other I/O connection.

It is a copy of github.com/asynkron/protoactor-go/remote at
v0.0.0-20240822202345-3c0e61ca19c9 (Apache License 2.0, see LICENSE), with its
internal queues copied to transport/internal/queue. The one change: Start no
longer calls grpclog.SetLoggerV2. That call writes grpc's process-wide logger,
which the grpc goroutines of every other actor system in the process read
without synchronisation, so a process that hosts several actor systems (the
demo, the in-process tests) had a data race on every Start. The transport
package sets grpc's logger once during package initialisation instead.
*/
package remote
