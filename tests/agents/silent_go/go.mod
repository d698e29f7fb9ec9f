module example.com/silentgo

go 1.24
