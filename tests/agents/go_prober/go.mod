module github.com/etherhost/ether/tests/agents/go_prober

go 1.24

require github.com/etherhost/ether/adapters/go v0.0.0

replace github.com/etherhost/ether/adapters/go => ../../../adapters/go
