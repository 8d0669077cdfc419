# elidectl/: the administrator's command line.  Verbs read through a source
# (source.h): today the segments directly (source-direct.c).
bin_PROGRAMS += elidectl/elidectl
elidectl_elidectl_SOURCES = \
	elidectl/elidectl.c elidectl/elidectl.h \
	elidectl/list.c \
	elidectl/show.c \
	elidectl/format.c \
	elidectl/source.c elidectl/source.h \
	elidectl/source-direct.c \
	elidectl/table.c elidectl/table.h \
	elidectl/json.c elidectl/json.h
# libelide-tools.la: the segment reader, with libelide-common.la (log, elfsym).
elidectl_elidectl_LDADD = common/libelide-tools.la
dist_man_MANS += elidectl/elidectl.1
