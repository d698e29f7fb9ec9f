module example.com/brokengo

go 1.24
