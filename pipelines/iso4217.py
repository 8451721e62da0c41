"""ISO 4217 currency codes, for the catalog's `currency` setting.

A list in the code rather than a dependency: pycountry or babel would add several MB of
translations to check one setting. The codes are ISO 4217 List One as Debian's iso-codes 4.15
publishes it (the data pycountry ships), plus ZWG and XCG, added by ISO since. Codes withdrawn
since (HRK, SLL, ZWL, ANG...) stay, so a past month's catalog still re-runs; XTS (testing) and
XXX (no currency) are left out: no invoice is in either. Update it when ISO adds a currency.
"""

_LIST_ONE = """
    AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BOV BRL BSD BTN
    BWP BYN BZD CAD CDF CHE CHF CHW CLF CLP CNY COP COU CRC CUC CUP CVE CZK DJF DKK DOP DZD EGP
    ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HRK HTG HUF IDR ILS INR IQD IRR
    ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD
    MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR
    PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SLL SOS SRD SSP STN SVC SYP SZL
    THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX USD USN UYI UYU UYW UZS VED VES VND VUV WST XAF
    XAG XAU XBA XBB XBC XBD XCD XCG XDR XOF XPD XPF XPT XSU XUA YER ZAR ZMW ZWG ZWL
"""
CURRENCY_CODES = frozenset(_LIST_ONE.split())
