module github.com/nvboot/nvboot

go 1.26
