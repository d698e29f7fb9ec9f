module github.com/etherhost/ether/adapters/go

go 1.24
