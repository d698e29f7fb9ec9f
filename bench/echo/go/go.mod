module github.com/etherhost/ether/bench/echo/go

go 1.24

require github.com/etherhost/ether/adapters/go v0.0.0

replace github.com/etherhost/ether/adapters/go => ../../../adapters/go
